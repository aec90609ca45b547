"""The demo's story, step by step: apply, scale up (dc1 fills, eu takes the overflow), scale down
(eu gives back first), an agent goes silent (its replicas fail over).

Why separate from the view and the environment: each step is an action on the hub plus a
condition on what the federation then shows — placement from the coordinator (SDK), pods from the
member clusters — and the same steps drive the terminal view, the JSON lines for scripts and the
end-to-end test's assertions. A step waits (with a deadline) until its condition holds, reporting
every observation on the way, so a person watches it happen and a test fails with what it saw.
"""

from __future__ import annotations

import dataclasses
import pathlib
import time
import typing
from collections.abc import Callable, Iterator
from typing import Any

import yaml
from kubernetes import client

from federation import sdk
from federation.api import common, names
from federation.api import spread as spread_api
from federation.demo import environment
from federation.kube import clients
from federation.kube import errors as kube_errors

NAMESPACE, NAME = "demo", "web"
KEY = f"{NAMESPACE}/{NAME}"
EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "demo" / "web.yaml"
STEP_TIMEOUT = 120.0
POLL_SECONDS = 1.0
REQUEST_TIMEOUT = 10.0
"""Seconds any one request to the hub may take."""


@dataclasses.dataclass(frozen=True)
class Row:
    """One (subset, cluster): replicas the coordinator placed there, pods running and pending."""

    subset: str
    cluster: str
    desired: int
    running: int
    pending: int


@dataclasses.dataclass(frozen=True)
class Observation:
    """What the federation shows at one moment."""

    rows: tuple[Row, ...]
    ready: dict[str, bool]
    """Member clusters by name: is the coordinator hearing their agent."""

    def _rows(self, cluster: str | None, subset: str | None) -> list[Row]:
        return [r for r in self.rows if cluster in (None, r.cluster) and subset in (None, r.subset)]

    def desired(self, cluster: str | None = None, *, subset: str | None = None) -> int:
        """Replicas placed (in one cluster and/or subset when given)."""
        return sum(r.desired for r in self._rows(cluster, subset))

    def running(self, cluster: str | None = None, *, subset: str | None = None) -> int:
        """Pods running (in one cluster and/or subset when given)."""
        return sum(r.running for r in self._rows(cluster, subset))

    def settled(self, *, replicas: int, ignore: frozenset[str] = frozenset()) -> bool:
        """Every replica placed and every placed pod running (pods of `ignore` clusters aside)."""
        mine = [r for r in self.rows if r.cluster not in ignore]
        return self.desired() == replicas and all(r.running == r.desired and not r.pending for r in mine)

    def to_json(self) -> dict[str, Any]:
        return {"rows": [dataclasses.asdict(r) for r in self.rows], "ready": dict(self.ready)}


@dataclasses.dataclass(frozen=True)
class Step:
    """One step: what was done, why it matters, and what the federation showed at its end."""

    number: int
    title: str
    explanation: str
    observation: Observation
    seconds: float


Observer = Callable[[str, Observation], None]


def ensure_namespace(api: client.ApiClient, namespace: str) -> None:
    """Create `namespace` in the cluster of `api` unless it exists."""
    try:
        with kube_errors.translated(f"create namespace {namespace}"):
            client.CoreV1Api(api).create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)),
                _request_timeout=REQUEST_TIMEOUT)
    except kube_errors.Conflict:
        pass  # it exists from an earlier step


def create_workload(hub: client.ApiClient, namespace: str, *, deployment: dict[str, Any],
                    spread: dict[str, Any]) -> None:
    """On the hub: the namespace (unless it exists), the target Deployment, its FederatedSpread."""
    ensure_namespace(hub, namespace)
    body = typing.cast(client.V1Deployment, deployment)  # the client sends a dict body as it is
    client.AppsV1Api(hub).create_namespaced_deployment(namespace, body, _request_timeout=REQUEST_TIMEOUT)
    client.CustomObjectsApi(hub).create_namespaced_custom_object(
        common.API_GROUP, common.API_VERSION, namespace, spread_api.PLURAL, spread,
        _request_timeout=REQUEST_TIMEOUT)


def scale_target(hub: client.ApiClient, namespace: str, name: str, *, replicas: int) -> None:
    """`kubectl scale deployment/NAME --replicas=N` on the hub: the one knob of a spread's size."""
    client.AppsV1Api(hub).patch_namespaced_deployment_scale(
        name, namespace, {"spec": {"replicas": replicas}}, _request_timeout=REQUEST_TIMEOUT)


class Story:
    """Runs the steps against a started `environment.Federation`."""

    def __init__(self, federation: environment.Federation) -> None:
        self.federation = federation
        self.hub = clients.api_client(pathlib.Path(federation.kubeconfig("hub")))
        self.members = {
            m.name: client.CoreV1Api(clients.api_client(pathlib.Path(federation.kubeconfig(m.name))))
            for m in federation.members}
        self.placements = federation.placement_client(timeout=5.0)

    def close(self) -> None:
        self.placements.close()

    # --- observing -----------------------------------------------------------------------------

    def observe(self) -> Observation:
        """Placement per (subset, cluster) from the coordinator, pods from every member."""
        try:
            placed = self.placements.placement(KEY)
        except sdk.SpreadNotFound:
            placed = None
        pods: dict[tuple[str, str], list[int]] = {}
        for name, core in self.members.items():
            found = core.list_namespaced_pod(NAMESPACE, label_selector=f"{names.SPREAD_LABEL}={NAME}",
                                             _request_timeout=REQUEST_TIMEOUT)
            for pod in found.items:
                meta = pod.metadata
                if meta is None or meta.deletion_timestamp is not None:
                    continue
                subset = (meta.annotations or {}).get(names.SUBSET_ANNOTATION, "-")
                counts = pods.setdefault((subset, name), [0, 0])
                phase = pod.status.phase if pod.status else None
                counts[0 if phase == "Running" else 1] += phase in ("Running", "Pending")
        rows: list[Row] = []
        seen: set[tuple[str, str]] = set()
        for share in placed.subsets if placed else []:
            for name, desired in share.clusters.items():
                running, pending = pods.get((share.name, name), [0, 0])
                rows.append(Row(share.name, name, desired, running, pending))
                seen.add((share.name, name))
        for (subset_name, name), (running, pending) in sorted(pods.items()):
            if (subset_name, name) not in seen:
                rows.append(Row(subset_name, name, 0, running, pending))
        ready = {c.name: c.ready for c in self.placements.clusters()}
        return Observation(rows=tuple(rows), ready=ready)

    def wait(self, until: Callable[[Observation], bool], *, what: str, observer: Observer) -> Observation:
        """Observe every POLL_SECONDS until `until` holds; TimeoutError saying what was seen."""
        deadline = time.monotonic() + STEP_TIMEOUT
        while True:
            seen = self.observe()
            observer(what, seen)
            if until(seen):
                return seen
            failed = self.federation.failed()
            if failed:
                raise environment.DemoError("a process of the federation stopped:\n" + "\n".join(failed))
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not reached within {STEP_TIMEOUT:.0f} s; "
                                   f"last seen {seen.to_json()}")
            time.sleep(POLL_SECONDS)

    # --- acting --------------------------------------------------------------------------------

    def apply_example(self) -> None:
        """The namespace, the Deployment and the FederatedSpread of examples/demo/web.yaml."""
        deployment, spread = yaml.safe_load_all(EXAMPLE.read_text())
        create_workload(self.hub, NAMESPACE, deployment=deployment, spread=spread)

    def scale(self, replicas: int) -> None:
        """`kubectl scale deployment/web --replicas=N` on the hub."""
        scale_target(self.hub, NAMESPACE, NAME, replicas=replicas)

    # --- the steps -----------------------------------------------------------------------------

    def steps(self, observer: Observer) -> Iterator[Step]:
        """Run the story; yields each step when its condition holds."""
        started = time.monotonic()

        def step(number: int, title: str, explanation: str, seen: Observation) -> Step:
            return Step(number, title, explanation, seen, round(time.monotonic() - started, 1))

        self.apply_example()
        seen = self.wait(lambda o: o.settled(replicas=2), what="apply: 2 replicas", observer=observer)
        yield step(1, "apply examples/demo/web.yaml (2 replicas)",
                   "dc1 is the first subset: it takes both replicas.", seen)

        self.scale(12)
        seen = self.wait(lambda o: o.settled(replicas=12), what="scale to 12", observer=observer)
        yield step(2, "kubectl scale deployment/web --replicas=12",
                   f"dc1 fills up ({seen.desired('dc1')} fit on its nodes, below its cap of 6); "
                   "the rest overflows to the eu clusters by free capacity.", seen)

        self.scale(5)
        seen = self.wait(lambda o: o.settled(replicas=5), what="scale to 5", observer=observer)
        yield step(3, "kubectl scale deployment/web --replicas=5",
                   "the eu subset gives back first; dc1 keeps its pods.", seen)

        eu = [m.name for m in self.federation.members if m.region == "eu"]
        victim = max(eu, key=lambda name: (seen.desired(name), name == eu[0]))
        others = frozenset({victim})
        self.federation.stop_agent(victim)
        seen = self.wait(lambda o: o.desired(victim) == 0 and o.settled(replicas=5, ignore=others)
                         and not o.ready.get(victim, True), what=f"{victim} silent", observer=observer)
        yield step(4, f"the agent of {victim} stops",
                   f"after clusterLostSeconds (10 s) {victim} is not ready and its replicas move to the "
                   f"other eu clusters (its old pods keep running until its agent returns).", seen)

        self.federation.start_agent(victim)
        seen = self.wait(lambda o: o.ready.get(victim, False) and o.settled(replicas=5),
                         what=f"{victim} back", observer=observer)
        yield step(5, f"the agent of {victim} returns",
                   f"{victim} is ready again and its running pods count again; the eu subset now holds "
                   "more than its share, and the surplus goes by the spread's scale-down order once "
                   "the replacements are Ready (no pod the spread needs is removed).", seen)
