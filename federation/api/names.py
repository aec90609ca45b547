"""Every well-known label and annotation fedspread writes or reads, defined once.

Why one module: these strings are a contract between processes (the coordinator, the agent's
webhook and controller, the CLI, and whoever runs `kubectl get -l` against a member cluster). A
name spelled in two places can drift in one; here each name has one definition and a note on who
writes it and who reads it. It sits in the API layer so that every other layer may import it.

Kubernetes' own names that fedspread reads (`pod-template-hash`, `kubernetes.io/hostname`) and
writes (`controller.kubernetes.io/pod-deletion-cost`) are listed too, so that no module spells one.
"""

from __future__ import annotations

PREFIX = "fedspread.io/"
"""Prefix of fedspread's own labels and annotations.

Read by the agent's watch cache, which keeps only the annotations under it on member Deployments.
"""

TOPOLOGY_PREFIX = "topology.fedspread.io/"
"""Prefix of the topology labels on MemberClusters (region, zone, provider)."""

SPREAD_LABEL = f"{PREFIX}spread"
"""The name of the spread a member Deployment and its pods belong to.

Written by the agent's workload sync on the member Deployment and its pod template. Read by the
webhook registration (object selector), the webhook (which spread a pod is admitted to), the watch
cache (which pods and Deployments to keep) and `fedspread` demos and tests (label selectors).
"""

SUBSET_ANNOTATION = f"{PREFIX}subset"
"""The subset a member pod was put in.

Written by the agent's admission webhook when it mutates a pod. Read by the webhook on pod
deletion and eviction, by the agent's bookkeeping (per-subset counts) and by deletion-cost ranking.
"""

GENERATION_ANNOTATION = f"{PREFIX}generation"
"""The spread generation a member Deployment was last synced from.

Written by the agent's workload sync on member Deployments; read by people and tests.
"""

TEMPLATE_REVISION_ANNOTATION = f"{PREFIX}template-revision"
"""The template revision (`SpreadAssignment.template_revision`) a member workload was rendered from.

Written by the agent's workload sync; read by its pod-counts report, which tells the coordinator
which revision each member workload's controller has observed, so the hub workload's
`observedGeneration` (and `kubectl rollout status` on the hub) waits for every member.
"""

DESIRED_HASH_ANNOTATION = f"{PREFIX}desired-hash"
"""Hash of the member Deployment body the agent last applied.

Written and read by the agent's workload sync: an equal hash (and replicas) means no update.
"""

SPREAD_KEY_ANNOTATION = f"{PREFIX}spread-key"
"""`namespace/name` of the spread that owns a member Deployment.

Written by the agent's workload sync; read by it to find Deployments it manages (and to release
them on orphaning removal).
"""

FEDERATION_LABEL = f"{PREFIX}federation"
"""The federation identity (the coordinator's `--federation-id`) a member Deployment belongs to.

Written by the agent's workload sync on the Deployments it creates or adopts; read by it: it
scales, updates, releases or deletes only Deployments whose value is the federation of the
assignment (or removal) at hand. A label, so `kubectl get deploy -l` finds them.
"""

SPREAD_UID_ANNOTATION = f"{PREFIX}spread-uid"
"""The hub FederatedSpread's `metadata.uid` that owns a member Deployment.

Written by the agent's workload sync next to `FEDERATION_LABEL`; read by it: a Deployment is
managed only for the spread incarnation whose uid it carries.
"""

RELEASED_FROM_ANNOTATION = f"{PREFIX}released-from"
"""On a member Deployment the agent released (a removal that orphans its workload): whose it was,
`<federation>/<namespace>/<name>` (the federation id, then the spread key).

The release takes the live ownership marks off (`FEDERATION_LABEL`, `SPREAD_UID_ANNOTATION`, the
spread label and key), so nothing manages the Deployment meanwhile; this one mark stays so that a
spread of the same key in the same federation (the spread deleted and created again: `kubectl
replace --force`, a GitOps replace) adopts it, and no other spread does (`agents.ownership`).
"""


NEEDED_BY_ANNOTATION = f"{PREFIX}needed-by"
"""On a member copy of an object spreads' pods need (a ConfigMap, Secret, ServiceAccount or claim
the agent copied from the hub): the spread keys that need it in this cluster, sorted,
comma-separated. With `FEDERATION_LABEL`, the mark that the copy is fedspread's.

Written and read by the agent's dependency sync: a copy goes when no spread needs it any more (and
none left it orphaned, `ORPHANED_BY_ANNOTATION`).
"""

ORPHANED_BY_ANNOTATION = f"{PREFIX}orphaned-by"
"""On a member copy: the spread keys that were removed from this cluster with `deletionPolicy:
Orphan` (or stopped propagating their dependencies) while they needed it, sorted, comma-separated.
Their workloads may still use it, so the copy is never deleted while one is named here.

Written and read by the agent's dependency sync.
"""


def released_from(federation: str, spread: str) -> str:
    """The `RELEASED_FROM_ANNOTATION` value of spread key `spread` released in `federation`."""
    return f"{federation}/{spread}"


DEFAULT_FEDERATION_ID = "default"
"""The coordinator's (and the agent's) federation identity when `--federation-id` is not given;
both log a warning at startup when left at it (fine for the sandbox and the demo only)."""

FEDERATION_ID_PATTERN = r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$"
"""What a federation identity may be: a lowercase Kubernetes label value (it is written as one)."""

CREATED_BY_LABEL = f"{PREFIX}created-by"
"""On namespaces the agent created for a spread's workload (value `agent`); the agent never deletes them.

Written by the agent's workload sync; read by people and tests.
"""

REGION_LABEL = f"{TOPOLOGY_PREFIX}region"
"""A member cluster's region.

Written by the agent (its `--label` flags, sent in its hello) onto the MemberCluster; read by
spreads' `clusterSelector`s through the placement core, and by the CRD's printer columns.
"""

ZONE_LABEL = f"{TOPOLOGY_PREFIX}zone"
"""A member cluster's zone; written and read as `REGION_LABEL`."""

PROVIDER_LABEL = f"{TOPOLOGY_PREFIX}provider"
"""A member cluster's provider (`onprem`, `aws`, ...); written and read as `REGION_LABEL`."""

DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
"""Kubernetes' pod deletion cost (lower goes first on ReplicaSet scale-down).

Written by the agent's controller on every pod of a spread; read by the member cluster's
ReplicaSet controller, and by the agent's watch cache (to skip patches that change nothing).
"""

REVISION_LABEL = "pod-template-hash"
"""The ReplicaSet revision of a pod.

Written by the Deployment controller; read by the agent's webhook and bookkeeping (pods of a
rolling update are counted per revision).
"""

CONTROLLER_REVISION_LABEL = "controller-revision-hash"
"""The ControllerRevision of a StatefulSet's pod (a StatefulSet's counterpart of `REVISION_LABEL`).

Written by the StatefulSet controller; read with `REVISION_LABEL` by
`federation.core.rollout.pod_revision` (the per-revision subset counts of a rollout).
"""

HOSTNAME_LABEL = "kubernetes.io/hostname"
"""A node's hostname label, written by the kubelet.

Read by the placement core's inventory, which leaves it out when it groups nodes into pools.
"""

AGENT_PODS_WEBHOOK = "pods.fedspread.io"
AGENT_EVICTIONS_WEBHOOK = "evictions.fedspread.io"
AGENT_WEBHOOKS = (AGENT_PODS_WEBHOOK, AGENT_EVICTIONS_WEBHOOK)
"""The webhooks of the agent's MutatingWebhookConfiguration, in its order.

Written by the agent's registration (agents/webhook/registration.py) and deploy/agent; read by
`fedspread certs webhook`, which writes the caBundle patch for each of them.
"""

AGENT_WEBHOOK_SERVICE = "fedspread-agent"
AGENT_NAMESPACE = "fedspread-system"
"""The agent's Service and namespace in deploy/agent: the names its webhook certificate must carry."""

LEADER_LABEL = f"{PREFIX}coordinator-leader"
"""On the coordinator pod that leads (value "true"); absent on a standby.

Written by the leading coordinator on its own pod (`coordinator.hub.pod_label`) once it leads and
has listed the hub, removed when it stops; a starting coordinator removes it from its pod first
(a restarted container must not keep a label its predecessor set). Read by the Service
fedspread-coordinator (deploy/coordinator/service.yaml), whose selector sends agents, SDK users and
the hub's webhook calls to the leader only.
"""

EXTERNAL_METRICS_SERVICE = "fedspread-external-metrics"
COORDINATOR_NAMESPACE = "fedspread-system"
"""The Service (and its namespace, deploy/coordinator's) the hub's aggregator reaches the
coordinator's `external.metrics.k8s.io` server through: the APIService names it, and the server's
certificate must carry `fedspread-external-metrics.fedspread-system.svc` (deploy/external-metrics)."""
