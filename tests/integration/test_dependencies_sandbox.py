"""The objects a spread's pods need, copied from the hub into exactly the members that run it
(issue 24 §2), on the sandbox with a real coordinator and two real `fedspread agent` processes.

The sandbox's kubelets check what a pod needs before they start it, as a real kubelet does
(`federation/sandbox/pod_refs.py`): a pod whose ConfigMap, Secret, image pull secret or
ServiceAccount is missing stays Pending, not Ready. So Ready pods in a member prove its copies.

Deployment `web` mounts ConfigMap `web-config`, reads Secret `web-credentials` through `envFrom`,
pulls with image pull secret `registry` and runs as ServiceAccount `web-runner`, all created on
the hub only. Its spread fills member-1 up to 2 replicas first, then member-2. Member-2 already has
a Secret `web-credentials` of its own (a user's), which must be left alone and reported.

- 2 replicas: Ready pods in member-1, with fedspread's copies there (marked with the federation
  and the spread that needs them); member-2, with no replicas, gets no copy at all.
- 3 replicas: member-2 gets its copies before its workload and runs a Ready pod; its own Secret
  keeps its data and gets no mark; the spread's Conflict condition names member-2's cluster and
  the Secret; DependencyMissing is False; `status.dependencies` (what `kubectl describe` shows)
  says which object is copied where and where it is in conflict. The real `kubectl rollout status
  deploy/web` on the hub returns, on the status the coordinator sums from the members.
- Editing the ConfigMap on the hub reaches both members.
- Deployment `api` references a ConfigMap the hub lacks: DependencyMissing names it, the workload
  is still placed (its member Deployment exists) and its pod waits; once the ConfigMap is created
  on the hub, the copy arrives and the pod becomes Ready.
- Back to 2 replicas: member-2 loses its replicas, then fedspread's copies there; the user's Secret
  stays.

The spread's `spec.propagate` lists the hub's Service `web` and PodDisruptionBudget `web`
(`minAvailable: 2`, policy/v1beta1 as Kubernetes 1.20 serves it): they go where the dependencies
go — member-1 alone at 2 replicas (its budget the whole 2), both at 3 (2 divided 1 and 1, largest
remainder); a hub edit of the Service's port and of the budget (3: divided 2 and 1) reaches both,
the member's own cluster IP kept; back at 2, member-2 loses both and member-1's budget is 3 again.
"""

from __future__ import annotations

import base64
import pathlib
from collections.abc import Iterator
from typing import Any

import agentside
import conftest
import hubside
import pytest
import waiting
from kubernetes import client

from federation.api import names
from tests.support import builders

MEMBERS = ("member-1", "member-2")
TIMEOUT = 120.0


@pytest.fixture
def coordinator(sandbox: Any, clusters: conftest.Clusters, local_ray: str) -> Iterator[tuple[list[str], Any]]:
    """A coordinator on the hub, and the cluster names of member-1's and member-2's agents."""
    cluster_names = hubside.names("deps1", "deps2")
    with hubside.running_coordinator(sandbox, clusters, members=cluster_names) as process:
        yield cluster_names, process


def app(name: str, replicas: int, *, config: str) -> dict[str, Any]:
    """A Deployment whose pods need ConfigMap `config`, and for `web` also a Secret (envFrom), an
    image pull secret and a ServiceAccount of their own."""
    body = builders.deployment(name, replicas, cpu="10m", image="registry.example/private/app:1")
    pod = body["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": "config", "configMap": {"name": config}}]
    pod["containers"][0]["volumeMounts"] = [{"name": "config", "mountPath": "/etc/app"}]
    pod["terminationGracePeriodSeconds"] = 0
    if name == "web":
        pod["containers"][0]["envFrom"] = [{"secretRef": {"name": "web-credentials"}}]
        pod["imagePullSecrets"] = [{"name": "registry"}]
        pod["serviceAccountName"] = "web-runner"
    return body


def ready_pods(clusters: conftest.Clusters, member: str, namespace: str, name: str) -> int:
    """How many pods of Deployment `name` in `member` are Ready (and not being deleted)."""
    pods = clusters.core(member).list_namespaced_pod(namespace, label_selector=f"app={name}").items
    return sum(1 for p in pods if p.metadata.deletion_timestamp is None
               and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or []))


def waiting_reasons(clusters: conftest.Clusters, member: str, namespace: str, name: str) -> list[str]:
    """The waiting reason of each container of Deployment `name`'s pods in `member`."""
    pods = clusters.core(member).list_namespaced_pod(namespace, label_selector=f"app={name}").items
    return [c.state.waiting.reason for p in pods for c in p.status.container_statuses or []
            if c.state is not None and c.state.waiting is not None]


def read(clusters: conftest.Clusters, member: str, kind: str, namespace: str, name: str) -> Any:
    """The object, or None."""
    method = {"ConfigMap": "read_namespaced_config_map", "Secret": "read_namespaced_secret",
              "ServiceAccount": "read_namespaced_service_account"}[kind]
    try:
        return getattr(clusters.core(member), method)(name, namespace)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


def propagated(clusters: conftest.Clusters, member: str, namespace: str) -> dict[str, tuple[str, Any]]:
    """fedspread's copies in `member` of the objects spec.propagate lists: "Kind/name" -> (the
    spreads recorded as needing it, the Service's target ports or the budget's minAvailable)."""
    found: dict[str, tuple[str, Any]] = {}
    try:
        service = clusters.core(member).read_namespaced_service("web", namespace)
    except client.ApiException as error:
        if error.status != 404:
            raise
    else:
        if (service.metadata.labels or {}).get(names.FEDERATION_LABEL) and service.spec.cluster_ip:
            found["Service/web"] = ((service.metadata.annotations or {}).get(names.NEEDED_BY_ANNOTATION, ""),
                                    [p.target_port for p in service.spec.ports])
    try:
        budget = clusters.custom(member).get_namespaced_custom_object(
            "policy", "v1beta1", namespace, "poddisruptionbudgets", "web")
    except client.ApiException as error:
        if error.status != 404:
            raise
    else:
        meta = budget["metadata"]
        if (meta.get("labels") or {}).get(names.FEDERATION_LABEL):
            found["PodDisruptionBudget/web"] = ((meta.get("annotations") or {}).get(
                names.NEEDED_BY_ANNOTATION, ""), budget["spec"].get("minAvailable"))
    return found


def copies(clusters: conftest.Clusters, member: str, namespace: str) -> dict[str, str]:
    """fedspread's copies in `member` ("Kind/name" -> the spreads recorded as needing it)."""
    found = {}
    for kind, name in (("ConfigMap", "web-config"), ("Secret", "web-credentials"), ("Secret", "registry"),
                       ("ServiceAccount", "web-runner"), ("ConfigMap", "api-config")):
        obj = read(clusters, member, kind, namespace, name)
        if obj is not None and (obj.metadata.labels or {}).get(names.FEDERATION_LABEL):
            found[f"{kind}/{name}"] = (obj.metadata.annotations or {}).get(names.NEEDED_BY_ANNOTATION, "")
    return found


def test_a_deployment_with_dependencies_runs_ready_pods_in_exactly_the_clusters_with_replicas(
        sandbox: Any, clusters: conftest.Clusters, namespace: str, coordinator: tuple[list[str], Any],
        tmp_path: pathlib.Path) -> None:
    (first, second), process = coordinator
    hub = hubside.Hub(clusters, namespace)
    hub_core = clusters.core(hubside.HUB)
    agents = [agentside.AgentProcess(clusters, cluster=cluster, member=member,
                                     coordinator=f"127.0.0.1:{process.port}", namespace=namespace,
                                     log=tmp_path / f"agent-{member}.log")
              for cluster, member in zip((first, second), MEMBERS, strict=True)]
    key = f"{namespace}/web"

    def state() -> str:
        return (f"web Ready pods {[ready_pods(clusters, m, namespace, 'web') for m in MEMBERS]}, copies "
                f"{[copies(clusters, m, namespace) for m in MEMBERS]}, conditions "
                f"{hub.spread_status('web').get('conditions')}; agent logs {[a.log for a in agents]}")

    def wait(probe: Any, what: str) -> Any:
        return waiting.wait_for(probe, timeout=TIMEOUT, message=lambda: f"{what}; {state()}", interval=0.5)

    try:
        for agent, member in zip(agents, MEMBERS, strict=True):
            wait(lambda a=agent, m=member: agentside.webhook_live(a, clusters, m, namespace),
                 f"the apiserver of {member} never called its agent's webhook")
        custom = clusters.custom(hubside.HUB)
        wait(lambda: all(hubside.member_ready(custom, c) == "True" for c in (first, second)),
             "the MemberClusters never became Ready")
        clusters.core("member-2").create_namespaced_secret(namespace, {
            "metadata": {"name": "web-credentials", "labels": {"owner": "team-b"}},
            "stringData": {"PASSWORD": "member-two-own"}})
        hub_core.create_namespaced_config_map(namespace, {"metadata": {"name": "web-config"},
                                                          "data": {"app.conf": "v1"}})
        hub_core.create_namespaced_secret(namespace, {"metadata": {"name": "web-credentials"},
                                                      "stringData": {"PASSWORD": "from-the-hub"}})
        hub_core.create_namespaced_secret(namespace, {
            "metadata": {"name": "registry"}, "type": "kubernetes.io/dockerconfigjson",
            "stringData": {".dockerconfigjson": '{"auths": {"registry.example": {"auth": "dTpw"}}}'}})
        hub_core.create_namespaced_secret(namespace, {"metadata": {"name": "unrelated"},
                                                      "stringData": {"TOKEN": "no-spread-needs-this"}})
        hub_core.create_namespaced_service_account(namespace, {"metadata": {"name": "web-runner"}})
        hub_core.create_namespaced_service(namespace, {"metadata": {"name": "web"}, "spec": {
            "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}})
        hub_custom = clusters.custom(hubside.HUB)
        hub_custom.create_namespaced_custom_object("policy", "v1beta1", namespace, "poddisruptionbudgets", {
            "apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})
        subsets = [{"name": "first", "clusters": [first], "maxReplicas": 2},
                   {"name": "rest", "clusters": [second]}]
        web = hubside.spread_body("web", target="web", subsets=subsets, lost_seconds=600)
        web["spec"]["propagate"] = [
            {"apiVersion": "v1", "kind": "Service", "name": "web"},
            {"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget", "name": "web"}]
        hub.create(app("web", 2, config="web-config"), web)

        # 2 replicas: all in member-1, which gets every copy; member-2 runs nothing and gets none.
        wait(lambda: ready_pods(clusters, "member-1", namespace, "web") == 2,
             "member-1 never ran 2 Ready pods")
        assert copies(clusters, "member-1", namespace) == {
            "ConfigMap/web-config": key, "Secret/web-credentials": key, "Secret/registry": key,
            "ServiceAccount/web-runner": key}
        # The coordinator holds the data of the Secrets a spread needs, not of the others (it knows
        # they exist); a Secret listed before the spread needed it is read from the hub.
        objects = process.world.hub_objects
        with process.coordinator.lock:
            held = {name: objects.get(namespace, "Secret", name) is not None
                    for name in ("web-credentials", "registry", "unrelated")}
            known = objects.exists(namespace, "Secret", "unrelated")
        assert held == {"web-credentials": True, "registry": True, "unrelated": False} and known, held
        assert process.secrets.reader.failures == 0
        copied = read(clusters, "member-1", "Secret", namespace, "web-credentials")
        assert base64.b64decode(copied.data["PASSWORD"]) == b"from-the-hub"
        assert copied.metadata.labels[names.FEDERATION_LABEL] == names.DEFAULT_FEDERATION_ID
        assert copies(clusters, "member-2", namespace) == {}
        wait(lambda: propagated(clusters, "member-1", namespace) == {
            "Service/web": (key, [8080]), "PodDisruptionBudget/web": (key, 2)},
             "member-1 never got the Service and the whole budget")
        assert propagated(clusters, "member-2", namespace) == {}

        # 3 replicas: member-2 gets its copies and a Ready pod; its own Secret is left alone.
        hub.scale("web", 3)
        wait(lambda: ready_pods(clusters, "member-2", namespace, "web") == 1,
             "member-2 never ran its Ready pod")
        # The hub Deployment's status, summed by the coordinator, satisfies the real kubectl.
        rollout = hub.rollout_status(sandbox, "deploy/web")
        assert rollout.returncode == 0 and "successfully rolled out" in rollout.stdout, rollout
        # A template change while member-2's agent is away: the hub's rollout status does not return
        # on member-2's old counts (the hub's observedGeneration waits for each member's controller
        # to observe the new revision); it returns once the agent is back and no old pod runs.
        agents[1].kill()
        hub.apps.patch_namespaced_deployment("web", namespace, {"spec": {"template": {"spec": {"containers": [
            {"name": "app", "env": [{"name": "RELEASE", "value": "2"}]}]}}}})
        early = hub.rollout_status(sandbox, "deploy/web", timeout=15)
        assert early.returncode != 0, f"rollout status returned while member-2 ran the old template: {early}"
        agents[1].start()
        rollout = hub.rollout_status(sandbox, "deploy/web", timeout=120)
        assert rollout.returncode == 0 and "successfully rolled out" in rollout.stdout, rollout
        old = [f"{member}/{pod.metadata.name}" for member in MEMBERS
               for pod in clusters.core(member).list_namespaced_pod(namespace, label_selector="app=web").items
               if pod.metadata.deletion_timestamp is None
               and ("RELEASE", "2") not in [(e.name, e.value) for e in pod.spec.containers[0].env or []]]
        assert not old, f"kubectl rollout status returned while pods of the old template ran: {old}"
        assert sum(ready_pods(clusters, m, namespace, "web") for m in MEMBERS) == 3
        assert copies(clusters, "member-2", namespace) == {
            "ConfigMap/web-config": key, "Secret/registry": key, "ServiceAccount/web-runner": key}
        own = read(clusters, "member-2", "Secret", namespace, "web-credentials")
        assert base64.b64decode(own.data["PASSWORD"]) == b"member-two-own"
        assert names.FEDERATION_LABEL not in (own.metadata.labels or {})
        conflict = wait(lambda: (found := hub.condition("web", "Conflict")).get("status") == "True" and found,
                        "the member's own Secret was never reported")
        assert conflict["reason"] == "MemberObjectNotOwned"
        assert f"{second}: Secret/web-credentials" in conflict["message"]
        assert hub.condition("web", "DependencyMissing")["status"] == "False"
        where = {f"{d['kind']}/{d['name']}": (d.get("clusters"), d.get("conflicts"))
                 for d in hub.spread_status("web")["dependencies"]}  # what `kubectl describe` shows
        both = sorted((first, second))
        assert where == {"ConfigMap/web-config": (both, []), "Secret/registry": (both, []),
                         "Secret/web-credentials": ([first], [second]),
                         "ServiceAccount/web-runner": (both, []), "Service/web": (both, []),
                         "PodDisruptionBudget/web": (both, [])}
        wait(lambda: [propagated(clusters, m, namespace) for m in MEMBERS] == [
            {"Service/web": (key, [8080]), "PodDisruptionBudget/web": (key, 1)}] * 2,
             "the budget of 2 was never divided 1 and 1")
        assigned_ip = clusters.core("member-2").read_namespaced_service("web", namespace).spec.cluster_ip

        # The hub is the source of truth: an edit reaches every member that runs the spread.
        hub_core.patch_namespaced_config_map("web-config", namespace, {"data": {"app.conf": "v2"}})
        wait(lambda: all(read(clusters, m, "ConfigMap", namespace, "web-config").data == {"app.conf": "v2"}
                         for m in MEMBERS), "the ConfigMap's edit never reached both members")
        hub_core.patch_namespaced_service("web", namespace, {"spec": {"ports": [
            {"port": 80, "targetPort": 9090}]}})
        hub_custom.patch_namespaced_custom_object("policy", "v1beta1", namespace, "poddisruptionbudgets",
                                                  "web", {"spec": {"minAvailable": 3}})
        wait(lambda: [propagated(clusters, m, namespace) for m in MEMBERS] == [
            {"Service/web": (key, [9090]), "PodDisruptionBudget/web": (key, part)} for part in (2, 1)],
             "the Service's and the budget's edits never reached both members")
        kept_ip = clusters.core("member-2").read_namespaced_service("web", namespace).spec.cluster_ip
        assert kept_ip == assigned_ip, "the member's own allocation is kept on update"

        # A dependency the hub lacks: reported, the workload placed all the same, its pod waiting.
        hub.create(app("api", 1, config="api-config"),
                   hubside.spread_body("api", target="api", subsets=subsets, lost_seconds=600))
        missing = wait(lambda: (found := hub.condition("api", "DependencyMissing")).get("status") == "True"
                       and found, "DependencyMissing never named api-config")
        assert "ConfigMap/api-config" in missing["message"]
        wait(lambda: clusters.apps("member-1").list_namespaced_deployment(
            namespace, field_selector="metadata.name=api").items, "api was never placed in member-1")
        waiting.wait_for(lambda: waiting_reasons(clusters, "member-1", namespace, "api") == [
            "CreateContainerConfigError"], timeout=TIMEOUT, message=lambda: (
                f"api's pod never waited for its ConfigMap: "
                f"{waiting_reasons(clusters, 'member-1', namespace, 'api')}"))
        hub_core.create_namespaced_config_map(namespace, {"metadata": {"name": "api-config"},
                                                          "data": {"app.conf": "api"}})
        wait(lambda: ready_pods(clusters, "member-1", namespace, "api") == 1,
             "api's pod never became Ready once its ConfigMap was on the hub")
        wait(lambda: hub.condition("api", "DependencyMissing").get("status") == "False",
             "DependencyMissing never cleared")

        # Back to 2: member-2 loses its replica, then fedspread's copies; the user's Secret stays.
        hub.scale("web", 2)
        wait(lambda: copies(clusters, "member-2", namespace) == {}, "member-2 kept the copies")
        wait(lambda: propagated(clusters, "member-2", namespace) == {}, "member-2 kept the Service or budget")
        wait(lambda: propagated(clusters, "member-1", namespace) == {
            "Service/web": (key, [9090]), "PodDisruptionBudget/web": (key, 3)},
             "member-1's budget never became the whole again")
        assert read(clusters, "member-2", "Secret", namespace, "web-credentials") is not None
        assert copies(clusters, "member-1", namespace) == {
            "ConfigMap/web-config": key, "Secret/web-credentials": key, "Secret/registry": key,
            "ServiceAccount/web-runner": key, "ConfigMap/api-config": f"{namespace}/api"}
        assert ready_pods(clusters, "member-1", namespace, "web") == 2
        for agent in agents:
            assert "from-the-hub" not in agent.output() and "ZnJvbS10aGUtaHVi" not in agent.output()
    finally:
        for agent in agents:
            agent.stop()
