"""deploy/agent's rights are exactly enough: the real agent, as the rendered ServiceAccount, on member-1.

What it proves, with the manifests rendered by the build's kustomize (`manifests.render`):

* the rendered Namespace, ServiceAccount, ClusterRole and ClusterRoleBinding are applied to
  member-1 (under unique names), a token is requested for that ServiceAccount, and the real
  `fedspread agent` runs with the rendered Deployment's arguments (its `--no-register-webhook`,
  the overlay's cluster name and topology labels) and a kubeconfig holding only that token,
  against the stand-in coordinator, over mTLS with the rendered `--link-*` flags (certificates
  from `federation.certs.bundles`, as `fedspread certs` issues them);
* the rendered MutatingWebhookConfiguration is applied with its clientConfig switched from the
  in-cluster Service to the agent's local URL (the sandbox has no pod network) and the caBundle
  of the certificate the agent serves (given with the rendered --tls-cert/--tls-key flags);
* with exactly those rights the agent reports its inventory, creates, updates and deletes the
  member Deployment, the apiserver's pods are placed by its webhook (`fedspread.io/subset`), it
  patches their deletion costs, deletes pods stuck unschedulable (Adaptive), creates a spread's
  namespace the member lacks, copies what a spread's `spec.propagate` lists (a Service, a
  PodDisruptionBudget, a NetworkPolicy, a Role within its own rights and a RoleBinding to it) and
  deletes them with the spread, and no call of it is ever refused — but the copy of a Role granting
  more than the agent holds, which the member refuses (no `escalate`), and which stops no other copy;
* and the ServiceAccount can do nothing more: SelfSubjectAccessReviews (and `kubectl auth can-i`)
  say no to listing secrets, node writes, webhook configurations, RBAC, ...; a real list of secrets
  is 403;
* every rendered object of deploy/agent and deploy/coordinator (but the CRDs and the RayCluster,
  whose operator the sandbox lacks) passes a server-side dry-run apply on a member and the hub
  (the coordinator's gRPC probes as TCP probes of the same port: the sandbox's 1.20 apiserver
  predates gRPC probes; its PodDisruptionBudget as policy/v1beta1, as 1.20 has no policy/v1;
  the ServiceMonitors of deploy/monitoring need the Prometheus Operator's CRD, which the sandbox
  lacks, and are only rendered, by tests/unit/test_deploy_render.py).

Isolation in the shared sandbox: cluster-scoped names get a unique suffix, the agent's namespace
is unique, and the webhook configuration gets a namespaceSelector for this module's namespace only
(other tests' pods carry the same `fedspread.io/spread` label).
"""

from __future__ import annotations

import base64
import collections
import contextlib
import copy
import dataclasses
import functools
import json
import pathlib
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
import yaml
from conftest import Clusters
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from waiting import wait_for

from bench import standin_coordinator
from federation.api import names as api_names
from federation.certs import bundles, names, pki, transport
from federation.core import member_copy
from federation.rpc import assignment
from federation.sandbox import build, state
from federation.sandbox.ports import free_port
from tests.support.manifests import render

REPO = pathlib.Path(__file__).resolve().parents[2]
OVERLAY = REPO / "deploy" / "agent" / "overlays" / "example"
MEMBER = "member-1"
ZONE = "topology.kubernetes.io/zone"
WAIT = 90.0  # generous: the sandbox shares 2 cores with other work
FEDSPREAD = str(pathlib.Path(sys.executable).parent / "fedspread")
TEST_LABEL = "fedspread-test/deploy"

Doc = dict[str, Any]


# --- rendering and relocating ------------------------------------------------------------------


def one(docs: Sequence[Doc], kind: str) -> Doc:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


def relocate(docs: Sequence[Doc], *, namespace: str, suffix: str) -> list[Doc]:
    """The rendered objects in `namespace`, cluster-scoped names suffixed, references kept."""
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration"}
    moved = []
    for original in docs:
        doc = copy.deepcopy(original)
        meta = doc["metadata"]
        if doc["kind"] == "Namespace":
            meta["name"] = namespace
        elif doc["kind"] in cluster_scoped:
            meta["name"] = f"{meta['name']}-{suffix}"
        elif "namespace" in meta:
            meta["namespace"] = namespace
        if doc["kind"] == "ClusterRoleBinding":
            doc["roleRef"]["name"] = f"{doc['roleRef']['name']}-{suffix}"
            for subject in doc["subjects"]:
                subject["namespace"] = namespace
        if doc["kind"] == "MutatingWebhookConfiguration":
            for hook in doc["webhooks"]:
                hook["clientConfig"]["service"]["namespace"] = namespace
        moved.append(doc)
    return moved


def resolved_env(main: Doc, config_maps: Sequence[Doc]) -> dict[str, str]:
    """The container's env as the kubelet resolves it (literal values and ConfigMap keys)."""
    maps = {c["metadata"]["name"]: c["data"] for c in config_maps}
    env = {}
    for item in main["env"]:
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            ref = item["valueFrom"]["configMapKeyRef"]
            env[item["name"]] = maps[ref["name"]][ref["key"]]
    return env


def local_command(docs: Sequence[Doc], *, replace: dict[str, str], extra: Sequence[str]) -> list[str]:
    """The rendered agent container's command line, runnable here: $(VAR)s expanded, the flags in
    `replace` given local values (each must be in the rendered args), `extra` appended."""
    main = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    env = resolved_env(main, [d for d in docs if d["kind"] == "ConfigMap"])
    args = [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], arg) for arg in main["args"]]
    flags = [a.partition("=")[0] for a in args]
    missing = set(replace) - set(flags)
    assert not missing, f"the rendered agent has no {missing}"
    args = [f"{a.partition('=')[0]}={replace[a.partition('=')[0]]}" if a.partition("=")[0] in replace else a
            for a in args]
    assert main["command"][0] == "fedspread"
    return [FEDSPREAD, *main["command"][1:], *args, *extra]


def arg_value(command: Sequence[str], flag: str) -> str:
    (value,) = [a.partition("=")[2] for a in command if a.partition("=")[0] == flag]
    return value


# --- the installation ----------------------------------------------------------------------------


def service_account_kubeconfig(record: state.ClusterRecord, token: str, path: pathlib.Path) -> pathlib.Path:
    """A kubeconfig holding nothing but the ServiceAccount's token (and the cluster's CA)."""
    admin = yaml.safe_load(pathlib.Path(record.kubeconfig).read_text())
    ca_data = admin["clusters"][0]["cluster"]["certificate-authority-data"]
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "agent",
        "clusters": [{"name": record.name, "cluster": {"server": record.server,
                                                       "certificate-authority-data": ca_data}}],
        "users": [{"name": "agent", "user": {"token": token}}],
        "contexts": [{"name": "agent", "context": {"cluster": record.name, "user": "agent"}}],
    }))
    path.chmod(0o600)
    return path


@dataclasses.dataclass
class Installed:
    """The rendered agent, installed under unique names and running as its ServiceAccount."""

    docs: list[Doc]                  # the relocated render
    namespace: str                   # the agent's namespace (the rendered Namespace, renamed)
    workload_namespace: str          # where the test's spreads live (the webhook's namespaceSelector)
    cluster: str                     # the overlay's cluster name
    labels: dict[str, str]           # the overlay's topology labels
    kubeconfig: pathlib.Path         # the ServiceAccount's
    service_account: client.ApiClient
    command: list[str]
    log: pathlib.Path
    process: subprocess.Popen[bytes]
    standin: standin_coordinator.StandinCoordinator

    def output(self) -> str:
        return self.log.read_text()

    def never_refused(self) -> None:
        """No API call of the agent was refused: its rights were enough for everything it did."""
        refused = [line for line in self.output().splitlines()
                   if re.search(r"\(403\)|\bforbidden\b", line, flags=re.IGNORECASE)]
        assert not refused, "the agent was refused:\n" + "\n".join(refused[:10])


@pytest.fixture(scope="module")
def installed(sandbox: state.SandboxState, clusters: Clusters,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    suffix = uuid.uuid4().hex[:8]
    work = tmp_path_factory.mktemp("deploy-agent")
    docs = relocate(render(OVERLAY), namespace=f"fedspread-deploy-{suffix}", suffix=suffix)
    core, rbac = clusters.core(MEMBER), client.RbacAuthorizationV1Api(clusters.api(MEMBER))
    admission = clusters.admission(MEMBER)
    namespace = one(docs, "Namespace")["metadata"]["name"]
    account = one(docs, "ServiceAccount")
    with contextlib.ExitStack() as cleanup:
        # The rendered identity and rights, exactly as rendered (but for the unique names).
        core.create_namespace(one(docs, "Namespace"))
        cleanup.callback(core.delete_namespace, namespace, propagation_policy="Background")
        core.create_namespaced_service_account(namespace, account)
        role = rbac.create_cluster_role(one(docs, "ClusterRole"))
        cleanup.callback(rbac.delete_cluster_role, role.metadata.name)
        binding = rbac.create_cluster_role_binding(one(docs, "ClusterRoleBinding"))
        cleanup.callback(rbac.delete_cluster_role_binding, binding.metadata.name)
        token = core.create_namespaced_service_account_token(
            account["metadata"]["name"], namespace,
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
             "spec": {"expirationSeconds": 3600}}).status.token
        kubeconfig = service_account_kubeconfig(sandbox.cluster(MEMBER), token, work / "agent.kubeconfig")
        service_account = config.new_client_from_config(config_file=str(kubeconfig))

        # The namespace the test's spreads live in; only its pods reach this module's webhook.
        workload_namespace = f"t-deploy-{suffix}"
        core.create_namespace({"metadata": {"name": workload_namespace, "labels": {TEST_LABEL: suffix}}})
        cleanup.callback(core.delete_namespace, workload_namespace, propagation_policy="Background")

        # The webhook's serving certificate, as an installer's CA would issue it.
        authority = pki.CertificateAuthority.create(f"fedspread-deploy-test {suffix}")
        cert, key = authority.issue_server("fedspread-agent", ips=("127.0.0.1",)).write(work, "webhook")

        # The link's certificates, as `fedspread certs` issues them for the overlay's cluster.
        overlay_cluster = resolved_env(one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0],
                                       [d for d in docs if d["kind"] == "ConfigMap"])["FEDSPREAD_CLUSTER"]
        bundles.make_ca(work / "ca")
        bundles.make_coordinator(work / "ca", work / "coordinator")
        bundles.make_agent(work / "ca", work / "link", cluster=overlay_cluster)
        link = transport.TLSFiles.in_directory(work / "link")
        standin = standin_coordinator.StandinCoordinator(
            heartbeat_interval_seconds=1, server_credentials=transport.server_credentials(
                transport.TLSFiles.in_directory(work / "coordinator"))).start()
        cleanup.callback(standin.stop)
        webhook_port = free_port()
        command = local_command(docs, replace={
            "--link-cert": str(link.cert), "--link-key": str(link.key), "--link-ca": str(link.ca),
            "--coordinator": standin.target, "--tls-cert": str(cert), "--tls-key": str(key),
            "--webhook-port": str(webhook_port), "--metrics-port": str(free_port()),
        }, extra=["--kubeconfig", str(kubeconfig), "--heartbeat-seconds", "1"])
        assert "--no-register-webhook" in command
        log = work / "agent.log"
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log.open("w"))
        run = Installed(
            docs=docs, namespace=namespace, workload_namespace=workload_namespace,
            cluster=arg_value(command, "--cluster"),
            labels=dict(a.partition("=")[2].split("=", 1) for a in command if a.startswith("--label=")),
            kubeconfig=kubeconfig, service_account=service_account, command=command, log=log,
            process=process, standin=standin)
        cleanup.callback(stop_agent, run)

        # The rendered registration, pointed at the agent here instead of the in-cluster Service.
        webhook = one(docs, "MutatingWebhookConfiguration")
        for hook in webhook["webhooks"]:
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{webhook_port}/mutate",
                                    "caBundle": base64.b64encode(authority.cert_pem).decode()}
            hook["namespaceSelector"] = {"matchLabels": {TEST_LABEL: suffix}}
        created = admission.create_mutating_webhook_configuration(webhook)
        cleanup.callback(admission.delete_mutating_webhook_configuration, created.metadata.name)
        assert "namespace" not in webhook["metadata"], "rendered cluster-scoped, as kustomize >= 3 does"
        assert created.metadata.namespace is None

        try:
            standin.wait_message(run.cluster, "hello", timeout=WAIT)
        except AssertionError as error:
            raise AssertionError(f"{error}\nagent ({' '.join(command)}):\n{run.output()}") from None
        yield run


def stop_agent(run: Installed) -> None:
    if run.process.poll() is None:
        run.process.send_signal(signal.SIGTERM)
        try:
            run.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            run.process.kill()
            run.process.wait()
    print(run.output())


# --- spreads -------------------------------------------------------------------------------------


def zone_rule(name: str, index: int, quota: int, zone: str) -> assignment.SubsetRule:
    return assignment.SubsetRule(name=name, index=index, quota=quota, required_term={
        "matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]})


def spread(namespace: str, name: str, *, generation: int, replicas: int,
           rules: Sequence[assignment.SubsetRule],
           strategy: assignment.Strategy | None = None) -> assignment.Assignment:
    labels = {"app": name}
    container = {"name": "app", "image": "registry.example/app:1", "resources": {"requests": {"cpu": "10m"}}}
    template = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": namespace, "labels": labels},
                "spec": {"replicas": 99, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}
    return assignment.Assignment(
        spread=f"{namespace}/{name}", generation=generation, namespace=namespace, workload=name,
        replicas=replicas, template=template, template_revision="t1", subsets=tuple(rules),
        subset_count=len(rules), strategy=strategy or assignment.Strategy())


def live_pods(clusters: Clusters, namespace: str, app: str) -> list[Any]:
    pods = clusters.core(MEMBER).list_namespaced_pod(namespace, label_selector=f"app={app}").items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def pod_name(pod: Any) -> str:
    return str(pod.metadata.name)


def deletion_cost(pod: Any) -> str | None:
    return (pod.metadata.annotations or {}).get(api_names.DELETION_COST_ANNOTATION)


def by_subset(pods: Sequence[Any], read: Callable[[Any], str | None]) -> dict[str | None, list[str | None]]:
    grouped: dict[str | None, list[str | None]] = collections.defaultdict(list)
    for pod in pods:
        grouped[(pod.metadata.annotations or {}).get(api_names.SUBSET_ANNOTATION)].append(read(pod))
    return {k: sorted(v, key=str) for k, v in grouped.items()}


def placed(clusters: Clusters, namespace: str, app: str) -> dict[str | None, list[str | None]]:
    """Names of the live pods of `app`, by the subset the webhook gave them."""
    return by_subset(live_pods(clusters, namespace, app), pod_name)


def deployment(clusters: Clusters, namespace: str, name: str) -> Any | None:
    try:
        return clusters.apps(MEMBER).read_namespaced_deployment(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def webhook_answers(clusters: Clusters, namespace: str, app: str) -> bool:
    """A dry-run pod of the spread comes back with a subset: the apiserver calls the agent."""
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "probe", "labels": {api_names.SPREAD_LABEL: app, "app": "probe"}},
           "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}}
    created = clusters.core(MEMBER).create_namespaced_pod(namespace, pod, dry_run="All")
    return api_names.SUBSET_ANNOTATION in (created.metadata.annotations or {})


# --- the tests -------------------------------------------------------------------------------------


def test_agent_works_with_exactly_the_rendered_rights(installed: Installed, clusters: Clusters) -> None:
    standin, cluster, namespace = installed.standin, installed.cluster, installed.workload_namespace
    hello = standin.wait_message(cluster, "hello", timeout=WAIT)
    assert standin.peers[cluster] == [names.agent_uri(cluster).encode()], "mTLS with the cluster's cert"
    assert dict(hello.topology_labels) == installed.labels == {
        "topology.fedspread.io/region": "eu-west", "topology.fedspread.io/zone": "eu-west-1a",
        "topology.fedspread.io/provider": "onprem"}, "the overlay's labels reach the coordinator"
    inventory = standin.wait_message(cluster, "inventory", timeout=WAIT,
                                     where=lambda r: len(r.node_pools) > 0)
    assert sum(pool.count for pool in inventory.node_pools) >= 3, "nodes listed and watched"

    rules = (zone_rule("a", 0, 2, f"{MEMBER}-a"), zone_rule("b", 1, 1, f"{MEMBER}-b"))
    standin.assign(cluster, spread(namespace, "web", generation=1, replicas=0, rules=rules))
    standin.wait_message(cluster, "ack", timeout=WAIT, where=lambda a: a.generation == 1 and not a.error)
    wait_for(lambda: webhook_answers(clusters, namespace, "web"), timeout=WAIT,
             message=lambda: f"the apiserver never got a subset from the agent; log:\n{installed.output()}")

    # Deployment created (deployments create), pods placed by the webhook.
    standin.assign(cluster, spread(namespace, "web", generation=2, replicas=3, rules=rules))
    wait_for(lambda: {k: len(v) for k, v in placed(clusters, namespace, "web").items()}
             == {"a": 2, "b": 1}, timeout=WAIT,
             message=lambda: f"pods by subset: {placed(clusters, namespace, 'web')}")
    made = deployment(clusters, namespace, "web")
    assert made is not None and made.spec.replicas == 3
    assert made.metadata.labels[api_names.SPREAD_LABEL] == "web"

    # Deletion costs patched (pods patch): in quota 100·(n-i) with n = 2 subsets.
    def costs() -> dict[str | None, list[str | None]]:
        return by_subset(live_pods(clusters, namespace, "web"), deletion_cost)

    wait_for(lambda: costs() == {"a": ["200", "200"], "b": ["100"]}, timeout=WAIT,
             message=lambda: f"deletion costs by subset: {costs()}")

    def counted(report: Any) -> bool:
        web = [s for s in report.spreads if s.spread == f"{namespace}/web"]
        return bool(web) and {s.subset: s.counts.running + s.counts.pending for s in web[0].subsets} == {
            "a": 2, "b": 1}

    standin.wait_message(cluster, "pod_counts", timeout=WAIT, where=counted)

    # Scaled (deployments update), then removed (deployments delete).
    standin.assign(cluster, spread(namespace, "web", generation=3, replicas=2, rules=rules))
    wait_for(lambda: (deployment(clusters, namespace, "web") or made).spec.replicas == 2, timeout=WAIT,
             message="the member Deployment was not scaled to 2")
    standin.remove(cluster, f"{namespace}/web")
    wait_for(lambda: deployment(clusters, namespace, "web") is None, timeout=WAIT,
             message="the removed spread's Deployment still exists")
    installed.never_refused()


def test_agent_reschedules_and_creates_namespaces_with_the_rendered_rights(
        installed: Installed, clusters: Clusters) -> None:
    standin, cluster, namespace = installed.standin, installed.cluster, installed.workload_namespace
    # Subset "nowhere" matches no node: its pod stays Unschedulable and is deleted (pods delete),
    # the replacement goes to "a".
    adaptive = assignment.Strategy(type="Adaptive", reschedule_critical_seconds=2, unschedulable_seconds=300)
    rules = (zone_rule("nowhere", 0, 1, "no-such-zone"), zone_rule("a", 1, 1, f"{MEMBER}-a"))
    standin.assign(cluster, spread(namespace, "stuck", generation=1, replicas=1, rules=rules,
                                   strategy=adaptive))
    first = wait_for(lambda: placed(clusters, namespace, "stuck").get("nowhere"),
                     timeout=WAIT, message=lambda: f"no pod in subset nowhere; log:\n{installed.output()}")
    report = standin.wait_message(cluster, "unschedulable", timeout=WAIT,
                                  where=lambda r: r.spread == f"{namespace}/stuck")
    assert report.subset == "nowhere"
    wait_for(lambda: placed(clusters, namespace, "stuck").keys() == {"a"}, timeout=WAIT,
             message=lambda: f"pods by subset: {placed(clusters, namespace, 'stuck')}")
    assert not set(first) & {p.metadata.name for p in live_pods(clusters, namespace, "stuck")}

    def rescheduled() -> set[str]:  # the rendered rights let the agent record an Event (events create)
        listing = json.loads(client.EventsV1Api(clusters.api(MEMBER)).list_namespaced_event(
            namespace, _preload_content=False).data)
        return {e["regarding"]["name"] for e in listing["items"] if e.get("reason") == "Rescheduled"}

    wait_for(lambda: set(first) <= rescheduled(), timeout=WAIT,
             message=lambda: f"no Rescheduled Event for {first}; log:\n{installed.output()}")
    standin.remove(cluster, f"{namespace}/stuck")

    # A spread in a namespace the member lacks: the agent creates it (namespaces create).
    missing = f"{namespace}-new"
    core = clusters.core(MEMBER)
    rule = (zone_rule("a", 0, 1, f"{MEMBER}-a"),)
    standin.assign(cluster, spread(missing, "ghost", generation=1, replicas=0, rules=rule))
    try:
        wait_for(lambda: deployment(clusters, missing, "ghost"), timeout=WAIT,
                 message=lambda: f"no Deployment in the new namespace; log:\n{installed.output()}")
        assert core.read_namespace(missing).metadata.labels[api_names.CREATED_BY_LABEL] == "agent"
    finally:
        standin.remove(cluster, f"{missing}/ghost")
        with contextlib.suppress(ApiException):
            core.delete_namespace(missing, propagation_policy="Background")
    wait_for(lambda: deployment(clusters, namespace, "stuck") is None, timeout=WAIT,
             message="the stuck spread's Deployment still exists")
    installed.never_refused()


def propagated_copies(namespace: str) -> tuple[assignment.DependencyCopy, ...]:
    """A Service, a policy/v1beta1 PodDisruptionBudget (the sandbox's 1.20), a NetworkPolicy, a Role
    within the agent's own rights (reading pods) and a RoleBinding to it, as the coordinator sends
    the objects a spread's `spec.propagate` lists; and Role `admin`, beyond the agent's rights
    (creating pods), which sorts before the Service."""
    def body(api_version: str, kind: str, name: str = "web", **fields: Any) -> dict[str, Any]:
        return member_copy.member_copy({"apiVersion": api_version, "kind": kind, "metadata": {
            "name": name, "namespace": namespace, "uid": "hub-uid"}, **fields}, marks={})

    return tuple(assignment.DependencyCopy(kind=d["kind"], name=d["metadata"]["name"], body=d,
                                           api_version=d["apiVersion"]) for d in (
        body("rbac.authorization.k8s.io/v1", "Role", "admin",
             rules=[{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]),
        body("v1", "Service", spec={"selector": {"app": "web"}, "ports": [{"port": 80}],
                                    "clusterIP": "10.0.0.9"}),
        body("policy/v1beta1", "PodDisruptionBudget",
             spec={"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}),
        body("networking.k8s.io/v1", "NetworkPolicy", spec={"podSelector": {"matchLabels": {"app": "web"}}}),
        body("rbac.authorization.k8s.io/v1", "Role",
             rules=[{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]),
        body("rbac.authorization.k8s.io/v1", "RoleBinding",
             roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "web"},
             subjects=[{"kind": "ServiceAccount", "name": "default", "namespace": namespace}])))


def marked_copies(clusters: Clusters, namespace: str) -> list[str]:
    """The resources of fedspread's copies named `web` in member-1's `namespace`."""
    custom = clusters.custom(MEMBER)
    reads: dict[str, Callable[[], Any]] = {
        "services": lambda: clusters.core(MEMBER).read_namespaced_service("web", namespace).to_dict()}
    for group, version, plural in (("policy", "v1beta1", "poddisruptionbudgets"),
                                   ("networking.k8s.io", "v1", "networkpolicies"),
                                   ("rbac.authorization.k8s.io", "v1", "roles"),
                                   ("rbac.authorization.k8s.io", "v1", "rolebindings")):
        reads[plural] = functools.partial(custom.get_namespaced_custom_object, group, version, namespace,
                                          plural, "web")
    found = []
    for plural, read in reads.items():
        try:
            labels = read()["metadata"].get("labels") or {}
        except ApiException as error:
            if error.status == 404:
                continue
            raise
        if api_names.FEDERATION_LABEL in labels:
            found.append(plural)
    return found


def test_agent_copies_what_spec_propagate_lists_with_the_rendered_rights(
        installed: Installed, clusters: Clusters) -> None:
    standin, cluster, namespace = installed.standin, installed.cluster, installed.workload_namespace
    rule = (zone_rule("a", 0, 1, f"{MEMBER}-a"),)
    shared = dataclasses.replace(spread(namespace, "web", generation=10, replicas=0, rules=rule),
                                 propagate_dependencies=True, dependencies=propagated_copies(namespace))
    everything = ["services", "poddisruptionbudgets", "networkpolicies", "roles", "rolebindings"]
    standin.assign(cluster, shared)
    wait_for(lambda: marked_copies(clusters, namespace) == everything, timeout=WAIT,
             message=lambda: f"copies: {marked_copies(clusters, namespace)}; log:\n{installed.output()}")
    ip = clusters.core(MEMBER).read_namespaced_service("web", namespace).spec.cluster_ip
    assert ip and ip != "10.0.0.9", "the member allocates its own cluster IP"
    # Role admin grants what the agent may not do: the member refuses it (no escalate), it alone.
    with pytest.raises(ApiException) as raised:
        client.RbacAuthorizationV1Api(clusters.api(MEMBER)).read_namespaced_role("admin", namespace)
    assert raised.value.status == 404
    standin.remove(cluster, f"{namespace}/web")
    wait_for(lambda: marked_copies(clusters, namespace) == [], timeout=WAIT,
             message=lambda: f"copies left: {marked_copies(clusters, namespace)}")
    refused = [line for line in installed.output().splitlines()
               if re.search(r"\(403\)|\bforbidden\b", line, flags=re.IGNORECASE)]
    assert refused and all(f"object=Role/{namespace}/admin " in line for line in refused), refused


# Rights the agent must not have; every one of them is refused.
DENIED = [
    # secrets, configmaps, serviceaccounts, claims: by name only (dependency copies), never listed
    ("", "secrets", "list"), ("", "secrets", "watch"), ("", "secrets", "patch"),
    ("", "configmaps", "list"), ("", "configmaps", "watch"), ("", "serviceaccounts", "list"),
    ("", "persistentvolumeclaims", "list"), ("", "serviceaccounts/token", "create"),
    ("", "nodes", "delete"), ("", "nodes", "update"), ("", "nodes", "patch"), ("", "nodes", "create"),
    ("", "nodes/status", "patch"), ("", "pods", "create"), ("", "pods", "update"),
    ("", "pods/eviction", "create"), ("", "pods/exec", "create"),
    ("", "namespaces", "delete"), ("", "namespaces", "get"), ("", "namespaces", "update"),
    ("apps", "deployments/status", "patch"), ("apps", "daemonsets", "create"),
    ("apps", "statefulsets/status", "patch"), ("apps", "replicasets/status", "patch"),
    ("batch", "jobs/status", "patch"), ("batch", "jobs", "update"),
    # member HPAs: seen, never written or deleted (issue 26)
    ("autoscaling", "horizontalpodautoscalers", "update"),
    ("autoscaling", "horizontalpodautoscalers", "delete"),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "get"),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "create"),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "update"),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "delete"),
    ("rbac.authorization.k8s.io", "clusterroles", "escalate"),
    ("rbac.authorization.k8s.io", "clusterroles", "bind"),
    ("rbac.authorization.k8s.io", "clusterrolebindings", "create"),
    # the objects spec.propagate lists: by name only, and no escalation through a copied Role
    ("", "services", "list"), ("policy", "poddisruptionbudgets", "watch"),
    ("rbac.authorization.k8s.io", "roles", "escalate"), ("rbac.authorization.k8s.io", "roles", "bind"),
    ("rbac.authorization.k8s.io", "roles", "list"), ("networking.k8s.io", "networkpolicies", "list"),
    ("fedspread.io", "federatedspreads", "list"), ("events.k8s.io", "events", "delete"),
    ("events.k8s.io", "events", "list"), ("", "events", "create"), ("*", "*", "*"),
]


def allowed(api: client.ApiClient, group: str, resource: str, verb: str) -> bool:
    """A SelfSubjectAccessReview, cluster-wide, as whoever `api` authenticates as."""
    plain, _, sub = resource.partition("/")
    review = client.AuthorizationV1Api(api).create_self_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"group": group, "resource": plain, "subresource": sub,
                                        "verb": verb}}})
    return bool(review.status.allowed)


def test_the_service_account_can_do_nothing_more(installed: Installed) -> None:
    role = one(installed.docs, "ClusterRole")
    granted = [(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]]
    assert len(granted) == 78  # replicasets: the owner chain (issue 23); member ReplicaSets, StatefulSets;
    # 4 x 4: the copies of the objects pods need; 5 x 4: the copies of what spec.propagate lists;
    # 6 on member Jobs (no update); 2 + 2 reading PodMetrics and member HPAs (issue 26)
    refused = [right for right in granted if not allowed(installed.service_account, *right)]
    assert not refused, f"rendered rights the ServiceAccount does not get: {refused}"
    too_much = [right for right in DENIED if allowed(installed.service_account, *right)]
    assert not too_much, f"the ServiceAccount may do more than it needs: {too_much}"

    with pytest.raises(ApiException) as raised:
        client.CoreV1Api(installed.service_account).list_namespaced_secret(installed.namespace)
    assert raised.value.status == 403

    kubectl = str(build.kubectl())
    for question, answer in ((["list", "secrets"], "no"), (["delete", "nodes"], "no"),
                             (["create", "mutatingwebhookconfigurations"], "no"),
                             (["patch", "pods"], "yes"), (["delete", "deployments.apps"], "yes")):
        result = subprocess.run([kubectl, "--kubeconfig", str(installed.kubeconfig), "auth", "can-i",
                                 *question, "--all-namespaces"], capture_output=True, text=True, timeout=30)
        assert result.stdout.strip() == answer, f"kubectl auth can-i {' '.join(question)}: {result.stdout}"


def server_dry_run(kubeconfig: str, docs: Sequence[Doc]) -> str:
    """`kubectl apply --dry-run=server` of `docs` with the build's kubectl; its output."""
    result = subprocess.run(
        [str(build.kubectl()), "--kubeconfig", kubeconfig, "apply", "--dry-run=server", "-o", "name",
         "-f", "-"], input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(docs)}),
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"the apiserver refused a rendered object:\n{result.stderr}"
    return result.stdout


def probes_for_the_sandbox(docs: Sequence[Doc]) -> tuple[list[Doc], int]:
    """The sandbox's apiserver is Kubernetes 1.20, older than gRPC probes (1.24; GA in 1.27): each
    `grpc` probe becomes a `tcpSocket` probe of the same port, the rest stays as rendered; with the
    number of probes changed."""
    changed, result = 0, []
    for original in docs:
        doc = copy.deepcopy(original)
        if doc["kind"] == "Deployment":
            for main in doc["spec"]["template"]["spec"]["containers"]:
                for name in ("readinessProbe", "livenessProbe", "startupProbe"):
                    probe = main.get(name, {})
                    if "grpc" in probe:
                        probe["tcpSocket"] = {"port": probe.pop("grpc")["port"]}
                        changed += 1
        result.append(doc)
    return result, changed


@pytest.mark.parametrize(("directory", "where"), [
    pytest.param(REPO / "deploy" / "agent", MEMBER, id="agent"),
    pytest.param(REPO / "deploy" / "coordinator", "hub", id="coordinator"),
])
def test_every_rendered_object_passes_a_server_side_dry_run(
        directory: pathlib.Path, where: str, sandbox: state.SandboxState, clusters: Clusters) -> None:
    suffix = uuid.uuid4().hex[:8]
    docs = relocate(render(directory), namespace=f"fedspread-dryrun-{suffix}", suffix=suffix)
    core = clusters.core(where)
    namespace = one(docs, "Namespace")
    core.create_namespace(namespace)  # a dry-run creates nothing, so the namespace must exist
    try:
        skipped = {"Namespace", "CustomResourceDefinition", "RayCluster"}  # created / no CRD here
        checked, changed = probes_for_the_sandbox([d for d in docs if d["kind"] not in skipped])
        for doc in checked:  # policy/v1 is 1.21+; the 1.20 sandbox has the same shape in v1beta1
            if doc["kind"] == "PodDisruptionBudget" and doc["apiVersion"] == "policy/v1":
                doc["apiVersion"] = "policy/v1beta1"
        assert changed == (2 if where == "hub" else 0), "the coordinator's probes are gRPC, the agent's HTTPS"
        output = server_dry_run(sandbox.cluster(where).kubeconfig, checked)
        assert len(output.split()) == len(checked), output
    finally:
        core.delete_namespace(namespace["metadata"]["name"], propagation_policy="Background")
