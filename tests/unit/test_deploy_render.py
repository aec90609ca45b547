"""deploy/ renders with the kustomize our build caches, and says exactly what the code does.

Why test manifests: they are a second description of the coordinator and the agent (flags, RBAC,
the webhook registration), and a second description drifts. Each test ties one part of the
rendered YAML to its source of truth: command-line flags to the click commands, the
MutatingWebhookConfiguration to `agents.webhook.registration`, RBAC to the exact list of calls
the code makes (the integration test `test_deploy_agent.py` proves the agent's list is enough),
the CRDs to `crds/`, the Ray version to the Dockerfile and pyproject. Rendering uses the pinned
kustomize 4.5.4 from `federation.sandbox.build` (`manifests.render`), never one found on PATH: what
renders here renders with `kubectl apply -k` of any kubectl since 1.24.
"""

from __future__ import annotations

import base64
import pathlib
import re
import tomllib
from collections.abc import Sequence
from typing import Any

import click
import pytest
import yaml
from packaging import requirements, version

from agents.webhook import registration
from federation.api import crd, names
from federation.cli import agent as agent_cli
from federation.cli import coordinator as coordinator_cli
from federation.coordinator.hub import admission as coordinator_admission
from federation.coordinator.hub import registration as coordinator_registration
from federation.coordinator.services import health
from federation.kube import webhook_registration
from tests.support.manifests import readme_blocks, render

REPO = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
NAMESPACE = "fedspread-system"
PLACEHOLDER_IMAGE = "fedspread:0.1.0"
PLACEHOLDER_AGENT_IMAGE = "fedspread-agent:0.1.0"

Doc = dict[str, Any]
Rule = tuple[str, str, frozenset[str]]


@pytest.fixture(scope="module")
def coordinator() -> list[Doc]:
    return render(DEPLOY / "coordinator")


@pytest.fixture(scope="module")
def agent() -> list[Doc]:
    return render(DEPLOY / "agent")


@pytest.fixture(scope="module")
def example() -> list[Doc]:
    return render(DEPLOY / "agent" / "overlays" / "example")


def one(docs: Sequence[Doc], kind: str, name: str | None = None) -> Doc:
    """The single rendered object of `kind` (and `name`)."""
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {[d['metadata']['name'] for d in found]}"
    return found[0]


def inventory(docs: Sequence[Doc]) -> set[tuple[str, str, str | None]]:
    return {(d["kind"], d["metadata"]["name"], d["metadata"].get("namespace")) for d in docs}


def rules(role: Doc) -> set[Rule]:
    """A ClusterRole's rules flattened to (apiGroup, resource, verbs)."""
    flat: set[Rule] = set()
    for rule in role["rules"]:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, f"unexpected rule fields: {rule}"
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                flat.add((group, resource, frozenset(rule["verbs"])))
    return flat


def container(deployment: Doc) -> Doc:
    (only,) = deployment["spec"]["template"]["spec"]["containers"]
    result: Doc = only
    return result


def flag_names(command: click.Command) -> set[str]:
    return {name for param in command.params for name in (*param.opts, *param.secondary_opts)}


def flags_used(args: Sequence[str]) -> list[str]:
    return [arg.partition("=")[0] for arg in args if arg.startswith("--")]


def arg_value(args: Sequence[str], flag: str) -> str:
    values = [a.partition("=")[2] for a in args if a.partition("=")[0] == flag]
    assert len(values) == 1, f"{flag} given {len(values)} times in {args}"
    return values[0]


def kubernetes_env(env: Sequence[Doc], config_maps: Sequence[Doc]) -> dict[str, str]:
    """Container env resolved the way the kubelet does, from literal values and ConfigMap keys."""
    maps = {c["metadata"]["name"]: c["data"] for c in config_maps}
    resolved = {}
    for item in env:
        if "value" in item:
            resolved[item["name"]] = item["value"]
        else:
            ref = item["valueFrom"]["configMapKeyRef"]
            assert ref["name"] in maps, f"env {item['name']} names ConfigMap {ref['name']}, not rendered"
            resolved[item["name"]] = maps[ref["name"]][ref["key"]]
    return resolved


def expand(args: Sequence[str], env: dict[str, str]) -> list[str]:
    """$(VAR) in args, as Kubernetes expands them."""
    return [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], arg) for arg in args]


# --- the coordinator (hub) -------------------------------------------------------------------


def test_coordinator_renders_exactly_these_objects(coordinator: list[Doc]) -> None:
    assert inventory(coordinator) == {
        ("Namespace", NAMESPACE, None),
        ("CustomResourceDefinition", "federatedspreads.fedspread.io", None),
        ("CustomResourceDefinition", "memberclusters.fedspread.io", None),
        ("ServiceAccount", "fedspread-coordinator", NAMESPACE),
        ("ClusterRole", "fedspread-coordinator", None),
        ("ClusterRoleBinding", "fedspread-coordinator", None),
        ("ClusterRole", "fedspread-placement-reader", None),
        ("Role", "fedspread-coordinator-leader", NAMESPACE),
        ("RoleBinding", "fedspread-coordinator-leader", NAMESPACE),
        ("Deployment", "fedspread-coordinator", NAMESPACE),
        ("PodDisruptionBudget", "fedspread-coordinator", NAMESPACE),
        ("Service", "fedspread-coordinator", NAMESPACE),
        ("ValidatingWebhookConfiguration", coordinator_registration.NAME, None),  # cluster-scoped
        ("Service", "fedspread-coordinator-metrics", NAMESPACE),
        ("RayCluster", "fedspread-ray", NAMESPACE),
        ("NetworkPolicy", "fedspread-ray-head", NAMESPACE),
        ("NetworkPolicy", "fedspread-ray-workers", NAMESPACE),
    }
    assert all(d["metadata"]["labels"]["app.kubernetes.io/part-of"] == "fedspread" for d in coordinator)


def test_coordinator_crds_are_the_generated_ones(coordinator: list[Doc]) -> None:
    for definition in crd.generate_crds().values():
        rendered = one(coordinator, "CustomResourceDefinition", definition["metadata"]["name"])
        labels = rendered["metadata"].pop("labels")
        assert labels == {"app.kubernetes.io/part-of": "fedspread"}
        assert rendered == definition, "deploy/coordinator must install exactly what `fedspread crds` writes"


def test_coordinator_rbac_is_exactly_what_it_calls(coordinator: list[Doc]) -> None:
    # hub.HubWatcher lists and watches the five kinds; hub.member_clusters creates MemberClusters;
    # status_writer reads and merge-patches the five status subresources; kube.events creates
    # Events and patches their series; access_review asks the hub whether an SDK user may read
    # what it asks for. Nothing more.
    assert rules(one(coordinator, "ClusterRole", "fedspread-coordinator")) == {
        ("fedspread.io", "federatedspreads", frozenset({"list", "watch"})),
        ("fedspread.io", "memberclusters", frozenset({"list", "watch", "create"})),
        ("fedspread.io", "federatedspreads/status", frozenset({"get", "patch"})),
        ("fedspread.io", "memberclusters/status", frozenset({"get", "patch"})),
        ("apps", "deployments", frozenset({"list", "watch"})),
        ("apps", "replicasets", frozenset({"list", "watch"})),
        ("apps", "statefulsets", frozenset({"list", "watch"})),
        ("apps", "deployments/status", frozenset({"get", "patch"})),
        ("apps", "replicasets/status", frozenset({"get", "patch"})),
        ("apps", "statefulsets/status", frozenset({"get", "patch"})),
        ("batch", "jobs", frozenset({"list", "watch"})),
        ("batch", "jobs/status", frozenset({"get", "patch"})),
        ("events.k8s.io", "events", frozenset({"create", "patch"})),
        ("authorization.k8s.io", "subjectaccessreviews", frozenset({"create"})),
        # the objects pods need, read from the hub to be copied into members (issue 24)
        ("", "configmaps", frozenset({"list", "watch"})),
        ("", "secrets", frozenset({"list", "watch"})),
        ("", "secrets", frozenset({"get"})),  # hub.secret_reads: one Secret a spread comes to need
        ("", "serviceaccounts", frozenset({"list", "watch"})),
        ("", "persistentvolumeclaims", frozenset({"list", "watch"})),
        # the objects spec.propagate may list, copied into members the same way
        ("", "services", frozenset({"list", "watch"})),
        ("policy", "poddisruptionbudgets", frozenset({"list", "watch"})),
        ("networking.k8s.io", "networkpolicies", frozenset({"list", "watch"})),
        ("rbac.authorization.k8s.io", "roles", frozenset({"list", "watch"})),
        ("rbac.authorization.k8s.io", "rolebindings", frozenset({"list", "watch"})),
    }
    assert rules(one(coordinator, "ClusterRole", "fedspread-placement-reader")) == {
        ("fedspread.io", "federatedspreads", frozenset({"get", "list", "watch"})),
        ("fedspread.io", "memberclusters", frozenset({"get", "list", "watch"})),
    }
    binding = one(coordinator, "ClusterRoleBinding", "fedspread-coordinator")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": "fedspread-coordinator"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "fedspread-coordinator",
                                    "namespace": NAMESPACE}]
    # hub.leader reads, creates and replaces its Lease; hub.pod_label patches its own pod's label:
    # in its namespace only.
    assert rules(one(coordinator, "Role", "fedspread-coordinator-leader")) == {
        ("coordination.k8s.io", "leases", frozenset({"get", "create", "update"})),
        ("", "pods", frozenset({"patch"})),
    }
    leader_binding = one(coordinator, "RoleBinding", "fedspread-coordinator-leader")
    assert leader_binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                         "name": "fedspread-coordinator-leader"}
    assert leader_binding["subjects"] == binding["subjects"]


def test_coordinator_deployment_runs_two_under_election_with_real_flags(coordinator: list[Doc]) -> None:
    deployment = one(coordinator, "Deployment", "fedspread-coordinator")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"] == {"type": "RollingUpdate",
                                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    assert spec["template"]["spec"]["serviceAccountName"] == "fedspread-coordinator"
    main = container(deployment)
    assert main["image"] == PLACEHOLDER_IMAGE
    assert main["command"] == ["fedspread", "coordinator"]
    unknown = set(flags_used(main["args"])) - flag_names(coordinator_cli.coordinator_command)
    assert not unknown, f"flags `fedspread coordinator` does not have: {unknown}"
    assert "--hub-kubeconfig" not in flags_used(main["args"]), "in a pod it uses its service account"
    # The arguments parse as the real command would parse them.
    context = coordinator_cli.coordinator_command.make_context("coordinator", list(main["args"]))
    assert context.params["listen"] == "0.0.0.0:7443"
    assert context.params["hub_kubeconfig"] is None
    assert context.params["no_ray"] is False and context.params["federation_id"] == "prod-eu"
    ports = {p["name"]: p["containerPort"] for p in main["ports"]}
    assert ports == {"grpc": 7443, "webhook": 9443, "health": context.params["health_port"],
                     "metrics": context.params["metrics_port"]}
    assert context.params["webhook_port"] == ports["webhook"]
    assert context.params["health_port"] and context.params["metrics_port"], "both served in a pod"
    # Two pods, one leader: the Lease in the pod's namespace, the pod labelled by its name.
    assert context.params["leader_elect"] is True
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in main["env"]}
    assert env == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
    timing = [context.params[k] for k in ("lease_duration_seconds", "renew_deadline_seconds",
                                         "retry_period_seconds")]
    assert timing == [15.0, 10.0, 2.0], "client-go's defaults"
    (term,) = spec["template"]["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"].items() <= \
        spec["template"]["metadata"]["labels"].items()


def test_coordinator_disruption_budget_keeps_one(coordinator: list[Doc]) -> None:
    budget = one(coordinator, "PodDisruptionBudget", "fedspread-coordinator")
    assert budget["apiVersion"] == "policy/v1" and budget["spec"]["minAvailable"] == 1
    pod_labels = one(coordinator, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


def test_coordinator_serves_mtls_from_its_secret(coordinator: list[Doc]) -> None:
    deployment = one(coordinator, "Deployment", "fedspread-coordinator")
    main = container(deployment)
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    mounts = {m["name"]: m for m in main["volumeMounts"]}
    assert volumes["tls"]["secret"] == {"secretName": "fedspread-coordinator-tls"}
    assert mounts["tls"]["readOnly"] is True
    directory = mounts["tls"]["mountPath"]
    context = coordinator_cli.coordinator_command.make_context("coordinator", list(main["args"]))
    assert context.params["insecure"] is False, "never plaintext in a real installation"
    assert [str(context.params[k]) for k in ("tls_cert", "tls_key", "tls_ca")] == [
        f"{directory}/tls.crt", f"{directory}/tls.key", f"{directory}/ca.crt"]
    assert [str(context.params[k]) for k in ("webhook_cert", "webhook_key")] == [
        f"{directory}/tls.crt", f"{directory}/tls.key"], "the webhook serves with the same Secret"
    assert not [d for d in coordinator if d["kind"] == "Secret"], "the installer's Secret, never shipped"


def test_coordinator_service_is_cluster_internal_grpc(coordinator: list[Doc]) -> None:
    service = one(coordinator, "Service", "fedspread-coordinator")
    assert service["spec"]["type"] == "ClusterIP", "mTLS, but still a private address only"
    assert service["spec"]["ports"] == [{"name": "grpc", "port": 7443, "targetPort": "grpc"},
                                        {"name": "webhook", "port": coordinator_registration.SERVICE_PORT,
                                         "targetPort": "webhook"},
                                        {"name": "health", "port": 7444, "targetPort": "health"}]
    pod_labels = one(coordinator, "Deployment")["spec"]["template"]["metadata"]["labels"]
    # The leader's pod only: its labels plus the leader label, which the leader sets on itself.
    selector = dict(service["spec"]["selector"])
    assert selector.pop(names.LEADER_LABEL) == "true"
    assert selector.items() <= pod_labels.items()


def test_coordinator_webhook_configuration_is_what_registration_builds(coordinator: list[Doc]) -> None:
    rendered = one(coordinator, "ValidatingWebhookConfiguration", coordinator_registration.NAME)
    service = one(coordinator, "Service", "fedspread-coordinator")
    expected = coordinator_registration.configuration(webhook_registration.service_client_config(
        namespace=service["metadata"]["namespace"], name=service["metadata"]["name"], ca_pem=b"",
        port=coordinator_registration.SERVICE_PORT, path=coordinator_admission.VALIDATE_PATH))
    for hook in expected["webhooks"]:  # caBundle is the installer's CA: an overlay or cert-manager sets it
        del hook["clientConfig"]["caBundle"]
    assert rendered["webhooks"] == expected["webhooks"]
    assert rendered["metadata"]["labels"].items() >= expected["metadata"]["labels"].items()
    for hook in rendered["webhooks"]:
        assert hook["failurePolicy"] == "Ignore", "the hub never depends on the coordinator to store objects"
        assert hook["sideEffects"] == "None" and hook["timeoutSeconds"] <= 5
        resources = {r for rule in hook["rules"] for r in rule["resources"]}
        assert resources <= {"federatedspreads", "memberclusters", "horizontalpodautoscalers"}, \
            "our CRDs (never their status) and HPAs (warned only) only"


def test_coordinator_probes_ask_grpc_health_on_the_plaintext_health_port(coordinator: list[Doc]) -> None:
    main = container(one(coordinator, "Deployment", "fedspread-coordinator"))
    context = coordinator_cli.coordinator_command.make_context("coordinator", list(main["args"]))
    # The kubelet's gRPC probes speak plaintext without a certificate: never the mTLS port, and a
    # port number (a gRPC probe takes no port name).
    ready, alive = main["readinessProbe"], main["livenessProbe"]
    assert set(ready) - {"periodSeconds", "initialDelaySeconds", "failureThreshold"} == {"grpc"}
    assert ready["grpc"]["port"] == alive["grpc"]["port"] == context.params["health_port"]
    # Ready while it answers, leader or standby (the Service routes by the leader label): a readiness
    # meaning "leads" would block rolling updates and the PodDisruptionBudget forever.
    assert ready["grpc"]["service"] == health.LIVENESS
    assert alive["grpc"]["service"] == health.LIVENESS, "alive while it answers, even while listing"
    assert alive["initialDelaySeconds"] >= context.params["ray_join_seconds"], "joining Ray comes first"


def metrics_service_targets(
        docs: Sequence[Doc], *, name: str, deployment: str, monitor: Sequence[Doc]) -> None:
    """Service `name` selects the Deployment's pods and sends its port `metrics` to the container port
    that --metrics-port serves; the ServiceMonitor in `monitor` selects exactly that Service."""
    service = one(docs, "Service", name)
    workload = one(docs, "Deployment", deployment)
    main = container(workload)
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"].items() <= workload["spec"]["template"]["metadata"]["labels"].items()
    (port,) = service["spec"]["ports"]
    assert port["name"] == "metrics" and port["targetPort"] == "metrics"
    ports = {p["name"]: p["containerPort"] for p in main["ports"]}
    assert ports["metrics"] == int(arg_value(main["args"], "--metrics-port"))
    (servicemonitor,) = monitor
    assert servicemonitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert servicemonitor["kind"] == "ServiceMonitor"
    assert servicemonitor["metadata"]["namespace"] == service["metadata"]["namespace"]
    wanted = servicemonitor["spec"]["selector"]["matchLabels"]
    selected = [d["metadata"]["name"] for d in docs
                if d["kind"] == "Service" and wanted.items() <= d["metadata"].get("labels", {}).items()]
    assert selected == [name]
    assert servicemonitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "30s"}]


def test_coordinator_metrics_service_and_its_optional_servicemonitor(
        coordinator: list[Doc]) -> None:
    assert not [d for d in coordinator if d["kind"] == "ServiceMonitor"], "the base applies without the CRD"
    metrics_service_targets(coordinator, name="fedspread-coordinator-metrics",
                            deployment="fedspread-coordinator",
                            monitor=render(DEPLOY / "monitoring" / "coordinator"))


def test_ray_cluster_is_what_the_coordinator_joins(coordinator: list[Doc]) -> None:
    ray_cluster = one(coordinator, "RayCluster", "fedspread-ray")
    assert ray_cluster["apiVersion"] == "ray.io/v1"
    spec = ray_cluster["spec"]
    head = spec["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert {p["name"]: p["containerPort"] for p in head["ports"]}["client"] == 10001
    (workers,) = spec["workerGroupSpecs"]
    assert 1 <= workers["minReplicas"] <= workers["replicas"] <= workers["maxReplicas"] <= 8
    # KubeRay names the head Service <cluster>-head-svc; Ray Client listens on 10001.
    address = arg_value(container(one(coordinator, "Deployment"))["args"], "--ray-address")
    assert address == f"ray://{ray_cluster['metadata']['name']}-head-svc:10001"
    # The shard actors are fedspread code: Ray nodes run the coordinator's own image.
    images = {head["image"], *(c["image"] for c in workers["template"]["spec"]["containers"])}
    assert images == {container(one(coordinator, "Deployment"))["image"]}


def test_ray_version_is_pinned_once_and_within_pyproject() -> None:
    rendered = yaml.safe_load((DEPLOY / "coordinator" / "raycluster.yaml").read_text())
    pinned = rendered["spec"]["rayVersion"]
    dockerfile = (REPO / "Dockerfile").read_text()
    match = re.search(r"^ARG RAY_VERSION=(\S+)$", dockerfile, flags=re.MULTILINE)
    assert match is not None and match.group(1) == pinned, "Dockerfile RAY_VERSION must equal rayVersion"
    assert '"ray[default,client]==${RAY_VERSION}"' in dockerfile
    assert re.search(r"^FROM python:3\.11-slim AS coordinator$", dockerfile, flags=re.MULTILINE)
    # The agent's image is built without Ray: its target installs the agent extra only.
    agent_stage = dockerfile.split("AS agent", 1)[1].split("FROM ", 1)[0]
    assert '"/src[agent]"' in agent_stage and "ray" not in agent_stage.lower()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    (ray,) = [requirements.Requirement(r) for r in project["optional-dependencies"]["coordinator"]
              if r.startswith("ray")]
    assert version.Version(pinned) in ray.specifier, f"rayVersion {pinned} is outside pyproject's {ray}"


# --- the agent (each member) -----------------------------------------------------------------


def test_agent_directory_is_its_base(agent: list[Doc]) -> None:
    assert agent == render(DEPLOY / "agent" / "base")


def test_agent_renders_exactly_these_objects(agent: list[Doc]) -> None:
    config_map = one(agent, "ConfigMap")["metadata"]["name"]
    assert config_map.startswith("fedspread-agent-"), "generated, with a content hash"
    assert inventory(agent) == {
        ("Namespace", NAMESPACE, None),
        ("ServiceAccount", "fedspread-agent", NAMESPACE),
        ("ClusterRole", "fedspread-agent", None),
        ("ClusterRoleBinding", "fedspread-agent", None),
        ("ConfigMap", config_map, NAMESPACE),
        ("Deployment", "fedspread-agent", NAMESPACE),
        ("Service", "fedspread-agent", NAMESPACE),
        ("Service", "fedspread-agent-metrics", NAMESPACE),
        ("MutatingWebhookConfiguration", "fedspread-agent", None),  # cluster-scoped
        ("NetworkPolicy", "fedspread-agent", NAMESPACE),
    }
    assert not [d for d in agent if d["kind"] == "Secret"], (
        "the certificate Secret is the installer's (cert-manager or their CA): shipping one would "
        "overwrite it on every apply")


def test_agent_rbac_is_exactly_what_it_calls(agent: list[Doc]) -> None:
    assert rules(one(agent, "ClusterRole", "fedspread-agent")) == {
        ("", "nodes", frozenset({"get", "list", "watch"})),
        ("", "pods", frozenset({"get", "list", "watch", "patch", "delete"})),
        ("apps", "deployments", frozenset({"get", "list", "watch", "create", "update", "patch", "delete"})),
        ("apps", "replicasets", frozenset({"get", "list", "watch", "create", "update", "patch", "delete"})),
        ("apps", "statefulsets", frozenset({"get", "list", "watch", "create", "update", "patch", "delete"})),
        ("batch", "jobs", frozenset({"get", "list", "watch", "create", "patch", "delete"})),
        ("", "namespaces", frozenset({"create"})),
        ("events.k8s.io", "events", frozenset({"create", "patch"})),
        # the spreads' pod usage (agents/usage/) and the member HPAs it leaves alone: read only
        ("metrics.k8s.io", "pods", frozenset({"get", "list"})),
        ("autoscaling", "horizontalpodautoscalers", frozenset({"list", "watch"})),
        # the member copies of the objects pods need (agents/controller/dependencies.py): no list, no watch
        ("", "configmaps", frozenset({"get", "create", "update", "delete"})),
        ("", "secrets", frozenset({"get", "create", "update", "delete"})),
        ("", "serviceaccounts", frozenset({"get", "create", "update", "delete"})),
        ("", "persistentvolumeclaims", frozenset({"get", "create", "update", "delete"})),
        # the member copies of the objects spec.propagate lists: no list, no watch, no escalate, no bind
        ("", "services", frozenset({"get", "create", "update", "delete"})),
        ("policy", "poddisruptionbudgets", frozenset({"get", "create", "update", "delete"})),
        ("networking.k8s.io", "networkpolicies", frozenset({"get", "create", "update", "delete"})),
        ("rbac.authorization.k8s.io", "roles", frozenset({"get", "create", "update", "delete"})),
        ("rbac.authorization.k8s.io", "rolebindings", frozenset({"get", "create", "update", "delete"})),
    }, "no admissionregistration rights: the agent runs with --no-register-webhook"
    binding = one(agent, "ClusterRoleBinding", "fedspread-agent")
    assert binding["roleRef"]["name"] == "fedspread-agent"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "fedspread-agent",
                                    "namespace": NAMESPACE}]


def test_agent_deployment_is_one_replica_recreated(agent: list[Doc]) -> None:
    deployment = one(agent, "Deployment", "fedspread-agent")
    spec = deployment["spec"]
    assert spec["replicas"] == 1, "the quota bookkeeping is in memory: two agents would each hand it out"
    assert spec["strategy"] == {"type": "Recreate"}, "a rolling update would run two agents at once"
    assert spec["template"]["spec"]["serviceAccountName"] == "fedspread-agent"
    main = container(deployment)
    assert main["image"] == PLACEHOLDER_AGENT_IMAGE
    assert main["command"] == ["fedspread", "agent"]
    unknown = set(flags_used(main["args"])) - flag_names(agent_cli.agent_command)
    assert not unknown, f"flags `fedspread agent` does not have: {unknown}"
    assert "--no-register-webhook" in main["args"]
    assert "--kubeconfig" not in flags_used(main["args"]), "in a pod it uses its service account"


def test_agent_certificate_comes_from_the_mounted_secret(agent: list[Doc]) -> None:
    deployment = one(agent, "Deployment", "fedspread-agent")
    main = container(deployment)
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    mounts = {m["name"]: m for m in main["volumeMounts"]}
    assert volumes["tls"]["secret"] == {"secretName": "fedspread-agent-tls"}
    assert mounts["tls"]["readOnly"] is True
    directory = mounts["tls"]["mountPath"]
    assert arg_value(main["args"], "--tls-cert") == f"{directory}/tls.crt"
    assert arg_value(main["args"], "--tls-key") == f"{directory}/tls.key"
    if main["securityContext"].get("readOnlyRootFilesystem"):
        assert mounts["tmp"]["mountPath"] == "/tmp", "the agent writes a private temporary directory"


def test_agent_link_certificate_comes_from_its_own_secret(agent: list[Doc]) -> None:
    deployment = one(agent, "Deployment", "fedspread-agent")
    main = container(deployment)
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    mounts = {m["name"]: m for m in main["volumeMounts"]}
    assert volumes["link"]["secret"] == {"secretName": "fedspread-agent-link"}, "not the webhook's Secret"
    assert mounts["link"]["readOnly"] is True
    directory = mounts["link"]["mountPath"]
    assert "--insecure" not in flags_used(main["args"]), "never plaintext in a real installation"
    assert [arg_value(main["args"], f) for f in ("--link-cert", "--link-key", "--link-ca")] == [
        f"{directory}/tls.crt", f"{directory}/tls.key", f"{directory}/ca.crt"]


def test_agent_service_and_probes_reach_the_webhook_port(agent: list[Doc]) -> None:
    deployment = one(agent, "Deployment", "fedspread-agent")
    main = container(deployment)
    ports = {p["name"]: p["containerPort"] for p in main["ports"]}
    assert ports == {"webhook": int(arg_value(main["args"], "--webhook-port")),
                     "metrics": int(arg_value(main["args"], "--metrics-port"))}
    service = one(agent, "Service", "fedspread-agent")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [{"name": "webhook", "port": 443, "targetPort": "webhook"}]
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    for probe in ("readinessProbe", "livenessProbe"):
        assert main[probe]["httpGet"]["scheme"] == "HTTPS"
        assert main[probe]["httpGet"]["port"] == "webhook"


def test_agent_metrics_service_and_its_optional_servicemonitor(
        agent: list[Doc]) -> None:
    assert not [d for d in agent if d["kind"] == "ServiceMonitor"], "the base applies without the CRD"
    metrics_service_targets(agent, name="fedspread-agent-metrics", deployment="fedspread-agent",
                            monitor=render(DEPLOY / "monitoring" / "agent"))


def test_webhook_configuration_is_what_registration_builds(agent: list[Doc]) -> None:
    rendered = one(agent, "MutatingWebhookConfiguration", registration.NAME)
    service = one(agent, "Service", "fedspread-agent")
    expected = registration.configuration(registration.service_client_config(
        namespace=service["metadata"]["namespace"], name=service["metadata"]["name"], ca_pem=b"",
        port=service["spec"]["ports"][0]["port"]))
    for hook in expected["webhooks"]:  # caBundle is the installer's CA: an overlay or cert-manager sets it
        hook["clientConfig"] = {k: v for k, v in hook["clientConfig"].items() if k != "caBundle"}
    assert rendered["webhooks"] == expected["webhooks"]
    assert rendered["metadata"]["labels"].items() >= expected["metadata"]["labels"].items()


def test_example_overlay_sets_cluster_coordinator_labels_image_and_ca(example: list[Doc]) -> None:
    deployment = one(example, "Deployment", "fedspread-agent")
    main = container(deployment)
    args = expand(main["args"], kubernetes_env(main["env"], [d for d in example if d["kind"] == "ConfigMap"]))
    assert arg_value(args, "--cluster") == "dc1" and arg_value(args, "--federation-id") == "prod-eu"
    assert arg_value(args, "--coordinator") == "10.20.0.15:7443"
    labels = agent_cli.label_pairs(tuple(a.partition("=")[2] for a in args if a.startswith("--label=")))
    assert labels == {"topology.fedspread.io/region": "eu-west", "topology.fedspread.io/zone": "eu-west-1a",
                      "topology.fedspread.io/provider": "onprem"}
    assert main["image"] == "registry.example.com/fedspread-agent:0.1.0"
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}
    webhook = one(example, "MutatingWebhookConfiguration", registration.NAME)
    bundles = {hook["clientConfig"].get("caBundle") for hook in webhook["webhooks"]}
    (placeholder,) = bundles
    with pytest.raises(ValueError):  # left unfilled, the apply fails instead of installing an untrusted hook
        base64.b64decode(placeholder, validate=True)


def test_readme_cert_manager_variant_renders_and_wires_the_secret(
        agent: list[Doc], tmp_path: pathlib.Path) -> None:
    blocks = readme_blocks("deploy-file")
    assert [name for name, _ in blocks] == [
        "kustomization.yaml", "certificate.yaml", "webhook-cainjector.yaml"]
    overlay = tmp_path / "deploy" / "agent" / "overlays" / "dc1"  # where the README says to put it
    overlay.mkdir(parents=True)
    (overlay.parent.parent / "base").symlink_to(DEPLOY / "agent" / "base")
    (overlay / "topology-labels.yaml").write_text(
        (DEPLOY / "agent" / "overlays" / "example" / "topology-labels.yaml").read_text())
    for name, body in blocks:
        (overlay / name).write_text(body)
    docs = render(overlay)

    certificate = one(docs, "Certificate")
    service = one(docs, "Service", "fedspread-agent")
    assert certificate["metadata"]["namespace"] == one(docs, "Issuer")["metadata"]["namespace"] == NAMESPACE
    svc = f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
    assert certificate["spec"]["dnsNames"] == [svc, f"{svc}.cluster.local"]
    volumes = one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "tls", "secret": {"secretName": certificate["spec"]["secretName"]}} in volumes
    webhook = one(docs, "MutatingWebhookConfiguration", registration.NAME)
    assert webhook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        f"{NAMESPACE}/{certificate['metadata']['name']}")
    assert all("caBundle" not in hook["clientConfig"] for hook in webhook["webhooks"]), "the injector's job"
    base = one(agent, "MutatingWebhookConfiguration", registration.NAME)
    assert webhook["webhooks"] == base["webhooks"], "the patch only annotates"
