"""A whole federation on this machine: sandbox control planes, the coordinator, an agent per member.

Why a module of its own: `fedspread demo`, the end-to-end tests and the examples test all need the
same federation a user would run — every part its own process, talking over the real wire — and
all need it torn down completely, also after Ctrl-C or a failed step. `Federation` starts it in
order (sandbox, coordinator, agents; each waited for), remembers every process it started, and
`close()` stops them in reverse order. Agents can be stopped and started again (failover).

Everything talks mTLS, as a user's federation would: `start()` first issues, with the same code as
`fedspread certs`, a CA, the coordinator's certificate, one agent certificate per member (naming
its cluster) and a client certificate for the SDK, under `<directory>/pki/` (each run makes new
ones). `placement_client()` is the SDK client with those; its user (`CLIENT_USER`) is bound on the
hub to the reader ClusterRole of deploy/coordinator/rbac.yaml, for the coordinator asks the hub's
RBAC what a user may read.

Both webhooks answer only their apiserver, as deploy/README.md asks of a real federation: every
sandbox apiserver presents a client certificate of the sandbox CA to webhooks
(`federation.sandbox.admission`), so each agent and the coordinator start with that CA as
`--webhook-client-ca` and its common name as `--webhook-allowed-cn` (a review posted by anyone
else is refused with 401 or 403). The coordinator serves its validating webhook with its own
certificate (which names the loopback) and the hub is pointed at it with the registration
deploy/coordinator/webhook.yaml ships (`hubsetup.register_coordinator_webhook`). The coordinator
also serves the external metrics API a hub HorizontalPodAutoscaler reads (docs/autoscaling.md), with
a serving certificate of the demo CA naming `fedspread-external-metrics.fedspread-system.svc`, and
the hub's aggregation layer is pointed at it (`sandbox.aggregation`: an APIService and an
ExternalName Service to the loopback), so `kubectl get --raw /apis/external.metrics.k8s.io/...`
and an `External` metric on the hub reach it through the hub apiserver.

The demo's members are `dc1` (on-premises, small: two 2-CPU nodes, it fills up fast), then
`aws-eu`, `gcp-eu` and further `*-eu` clusters (three 4-CPU nodes each, region `eu`). A benchmark
may bring members of its own shape (`MemberPlan.of_groups`) and place without Ray (`ray=False`).
The demo's coordinator places on a local Ray (`--local-ray`) to show that path; a coordinator
without Ray flags places in its own process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

from federation import sdk
from federation.api import names
from federation.certs import bundles, transport
from federation.sandbox import admission, aggregation, hubsetup, launcher, nodesim, state
from federation.sandbox.ports import free_port

Report = Callable[[str], None]
EU_NAMES = ("aws-eu", "gcp-eu", "azure-eu", "ovh-eu", "ionos-eu")
MAX_MEMBERS = 1 + len(EU_NAMES)
CLIENT = "client"
CLIENT_USER = "demo"
"""The SDK client certificate's user; it may read every namespace's placements and the clusters."""
COORDINATOR = "coordinator"
EXTERNAL_METRICS = "external-metrics"
"""The certificate directory of the coordinator's external metrics API (served to the hub's aggregator)."""
START_TIMEOUT = 120.0


class DemoError(RuntimeError):
    """The federation could not start; the message says which part and where its log is."""


@dataclasses.dataclass(frozen=True)
class MemberPlan:
    """One member cluster of the demo: its name, region and nodes."""

    name: str
    region: str
    nodes: int
    cpu: str
    groups: tuple[nodesim.NodeGroup, ...] = ()
    """The member's nodes when it has a shape of its own (see `of_groups`); empty for the demo's."""

    @classmethod
    def of_groups(cls, name: str, region: str, groups: Sequence[nodesim.NodeGroup]) -> MemberPlan:
        """A member whose nodes are exactly `groups` (mixed shapes, labels, taints)."""
        return cls(name, region, nodes=sum(g.count for g in groups), cpu="", groups=tuple(groups))

    def profile(self) -> list[nodesim.NodeGroup]:
        """The node simulator's profile: `nodes` nodes labelled with the region, `cpu` CPUs each.

        Two members have node variety for examples/ (per-architecture patches, node pools):
        aws-eu's nodes are arm64 (`kubernetes.io/arch`, Graviton-like), and gcp-eu has two node
        pools (`cloud.google.com/gke-nodepool`): `general` (all nodes but one, 16Gi) and `highmem`
        (one node, 64Gi). Every node of a member has the same CPUs, so CPU-bound pods fit exactly as
        on identical nodes (the demo's story depends on that, and on dc1's two 2-CPU nodes).
        A member made `of_groups` has exactly those groups.
        """
        if self.groups:
            return list(self.groups)
        allocatable = {"cpu": self.cpu, "memory": "16Gi", "pods": "110"}
        labels = {"type": "worker", "topology.kubernetes.io/region": self.region}
        if self.name == "aws-eu":
            labels["kubernetes.io/arch"] = "arm64"
        if self.name == "gcp-eu" and self.nodes > 1:
            pool = "cloud.google.com/gke-nodepool"
            return [nodesim.NodeGroup(prefix=f"{self.name}-node", count=self.nodes - 1,
                                      allocatable=allocatable, labels={**labels, pool: "general"}),
                    nodesim.NodeGroup(prefix=f"{self.name}-highmem", count=1,
                                      allocatable={**allocatable, "memory": "64Gi"},
                                      labels={**labels, pool: "highmem"})]
        return [nodesim.NodeGroup(prefix=f"{self.name}-node", count=self.nodes, allocatable=allocatable,
                                  labels=labels)]


def plan(members: int) -> list[MemberPlan]:
    """dc1 and `members - 1` eu clusters."""
    if not 2 <= members <= MAX_MEMBERS:
        raise ValueError(f"the demo runs 2 to {MAX_MEMBERS} members, not {members}")
    return [MemberPlan("dc1", "onprem", nodes=2, cpu="2"),
            *(MemberPlan(name, "eu", nodes=3, cpu="4") for name in EU_NAMES[:members - 1])]


def fedspread_command(*args: str) -> list[str]:
    """`fedspread ARGS` with this interpreter (works without the console script on PATH)."""
    return [sys.executable, "-m", "federation.cli", *args]


class Process:
    """One child process, its output in a log file, stopped with SIGTERM (then SIGKILL)."""

    def __init__(self, name: str, argv: Sequence[str], *, log: pathlib.Path) -> None:
        self.name, self.argv, self.log = name, list(argv), log
        with log.open("ab") as out:
            self.popen = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True)
        self.asked = False
        """SIGTERM was sent: it is sent once, because a second one can land while the process's
        interpreter shuts down with the default handler back, and kill it mid-exit."""

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 15) -> str:
        """The last lines of its log."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def terminate(self) -> None:
        """SIGTERM to the whole process group, without waiting (`stop` waits): processes asked
        together shut down side by side."""
        if self.popen.poll() is None and not self.asked:
            self.asked = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)

    def stop(self, *, timeout: float = 20.0) -> None:
        """SIGTERM, wait, then SIGKILL the whole process group."""
        if self.popen.poll() is not None:
            return
        try:
            self.terminate()
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)
        except ProcessLookupError:
            pass


class Federation:
    """Sandbox + coordinator + agents under `directory`; use as a context manager or call close()."""

    def __init__(self, directory: pathlib.Path, *, members: int | Sequence[MemberPlan] = 3,
                 report: Report = lambda _: None, heartbeat_seconds: float = 1.0, ray: bool = True,
                 usage_interval: int | None = None) -> None:
        self.directory = directory
        self.members = plan(members) if isinstance(members, int) else list(members)
        self.report = report
        self.heartbeat_seconds = heartbeat_seconds
        self.usage_interval = usage_interval
        """The agents' `--usage-interval` (None: the agent's default, 15 s, as the demo shows it); the
        tests' federation reads usage more often, so that an HPA's step waits less for it."""
        self.ray = ray
        """Place on a local Ray (`--local-ray`: the demo shows the Ray path), or in-process (what a
        coordinator does by default)."""
        self.sandbox: state.SandboxState | None = None
        self.coordinator: Process | None = None
        self.coordinator_address = f"127.0.0.1:{free_port()}"
        self.metrics_port = free_port()
        """Where the coordinator serves Prometheus metrics (`metrics_url`)."""
        self.webhook_port = free_port()
        """Where the coordinator serves its validating webhook (HTTPS, only to the hub apiserver)."""
        self.external_metrics_port = free_port()
        """Where the coordinator serves external.metrics.k8s.io (HTTPS, only to the hub's aggregator)."""
        self.agents: dict[str, Process] = {}
        self.stopped: set[str] = set()
        """Members whose agent was stopped on purpose (`stop_agent`)."""
        self.logs = directory / "logs"
        self.pki = directory / "pki"

    def __enter__(self) -> Federation:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- start ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Sandbox, then the coordinator, then every agent; DemoError (everything stopped) on failure."""
        try:
            self.logs.mkdir(parents=True, exist_ok=True)
            self._issue_certificates()
            self.sandbox = launcher.up(
                self.directory / "sandbox", members=[m.name for m in self.members],
                profiles={m.name: m.profile() for m in self.members}, crds=hubsetup.bundled_crds(),
                report=self.report)
            hubsetup.grant_placement_reader(self.sandbox.hub.kubeconfig, CLIENT_USER)
            self.report("starting the coordinator" + (" (and a local Ray)" if self.ray else ", without Ray"))
            self.coordinator = Process("coordinator", self.coordinator_argv(),
                                       log=self.logs / "coordinator.log")
            self._wait_serving()
            hubsetup.register_coordinator_webhook(
                self.sandbox.hub.kubeconfig, f"https://127.0.0.1:{self.webhook_port}",
                ca_pem=self.tls(COORDINATOR).ca.read_bytes())
            aggregation.register_api_service(self.sandbox.hub.kubeconfig, aggregation.api_service_manifests(
                "external.metrics.k8s.io", "v1beta1", namespace=names.COORDINATOR_NAMESPACE,
                service=names.EXTERNAL_METRICS_SERVICE, port=self.external_metrics_port,
                ca_pem=self.tls(EXTERNAL_METRICS).ca.read_bytes()))
            for member in self.members:
                self.start_agent(member.name)
            self._wait_agents()
        except BaseException:
            self.close()
            raise

    def webhook_client_flags(self) -> list[str]:
        """Who may post reviews to a webhook of this federation: the sandbox apiservers only."""
        assert self.sandbox is not None
        return ["--webhook-client-ca", self.sandbox.ca_file,
                "--webhook-allowed-cn", admission.WEBHOOK_CLIENT_CN]

    def coordinator_argv(self) -> list[str]:
        """The coordinator's command line: mTLS, free ports, its webhook open to the hub only."""
        assert self.sandbox is not None
        served = self.tls(COORDINATOR)
        return fedspread_command(
            "coordinator", "--hub-kubeconfig", self.sandbox.hub.kubeconfig,
            "--listen", self.coordinator_address, "--heartbeat-seconds", str(self.heartbeat_seconds),
            "--tls-cert", str(served.cert), "--tls-key", str(served.key), "--tls-ca", str(served.ca),
            "--metrics-port", str(self.metrics_port), "--health-port", "0",  # free, not fixed ports
            "--webhook-port", str(self.webhook_port), "--webhook-cert", str(served.cert),
            "--webhook-key", str(served.key), *self.webhook_client_flags(),
            "--external-metrics-port", str(self.external_metrics_port),
            "--external-metrics-cert", str(self.tls(EXTERNAL_METRICS).cert),
            "--external-metrics-key", str(self.tls(EXTERNAL_METRICS).key),
            *(("--local-ray",) if self.ray else ()))

    def agent_argv(self, name: str) -> list[str]:
        """Member `name`'s agent's command line: mTLS link, its webhook open to its apiserver only."""
        assert self.sandbox is not None
        member, record, link = self.member(name), self.sandbox.cluster(name), self.tls(name)
        return fedspread_command(
            "agent", "--cluster", name, "--kubeconfig", record.kubeconfig,
            "--coordinator", self.coordinator_address, "--webhook-port", "0", "--metrics-port", "0",
            "--link-cert", str(link.cert), "--link-key", str(link.key), "--link-ca", str(link.ca),
            "--label", f"{names.REGION_LABEL}={member.region}",
            "--heartbeat-seconds", str(self.heartbeat_seconds), "--deregister-on-exit",
            *([] if self.usage_interval is None else ["--usage-interval", str(self.usage_interval)]),
            *self.webhook_client_flags())

    def _issue_certificates(self) -> None:
        """A fresh CA and every certificate the federation uses, under `self.pki`."""
        self.report("issuing certificates (CA, coordinator, one per agent, SDK client)")
        authority = self.pki / "ca"
        bundles.make_ca(authority, name="fedspread demo CA", force=True)
        bundles.make_coordinator(authority, self.pki / COORDINATOR, force=True)
        bundles.make_coordinator(authority, self.pki / EXTERNAL_METRICS, force=True, hosts=[
            aggregation.serving_name(namespace=names.COORDINATOR_NAMESPACE,
                                     service=names.EXTERNAL_METRICS_SERVICE)])
        for member in self.members:
            bundles.make_agent(authority, self.pki / member.name, cluster=member.name, force=True)
        bundles.make_client(authority, self.pki / CLIENT, name=CLIENT_USER, force=True)

    def tls(self, name: str) -> transport.TLSFiles:
        """The certificate files of `name`: COORDINATOR, CLIENT or a member's name."""
        return transport.TLSFiles.in_directory(self.pki / name)

    def placement_client(self, *, timeout: float = 10.0) -> sdk.PlacementClient:
        """An SDK client for the coordinator, over mTLS with the demo's client certificate."""
        files = self.tls(CLIENT)
        return sdk.PlacementClient.with_tls(self.coordinator_address, ca=files.ca, cert=files.cert,
                                            key=files.key, timeout=timeout)

    def _wait_serving(self) -> None:
        """Until the coordinator answers ListClusters (Ray started, hub listed)."""

        assert self.coordinator is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if not self.coordinator.alive():
                raise DemoError(f"the coordinator exited; its log ({self.coordinator.log}) ends:\n"
                                f"{self.coordinator.tail()}")
            try:
                with self.placement_client(timeout=2.0) as client:
                    client.clusters()
                return
            except sdk.CoordinatorUnavailable:
                time.sleep(0.5)
        raise DemoError(f"the coordinator did not serve within {START_TIMEOUT:.0f} s; "
                        f"see {self.coordinator.log}")

    def _wait_agents(self) -> None:
        """Until the coordinator hears every agent and holds its inventory (nodes)."""
        deadline = time.monotonic() + START_TIMEOUT
        wanted = {m.name: m.nodes for m in self.members}
        with self.placement_client(timeout=5.0) as client:
            while time.monotonic() < deadline:
                heard = {c.name: c.node_count for c in client.clusters() if c.ready}
                if heard == wanted:
                    return
                failed = self.failed()
                if failed:
                    raise DemoError("an agent exited:\n" + "\n".join(failed))
                time.sleep(0.5)
        raise DemoError(f"not every agent connected within {START_TIMEOUT:.0f} s; see {self.logs}")

    def member(self, name: str) -> MemberPlan:
        """The member called `name`."""
        return next(m for m in self.members if m.name == name)

    def start_agent(self, name: str) -> None:
        """Start (or restart) the agent of member `name`."""
        self.report(f"starting the agent of {name}")
        self.stopped.discard(name)
        self.agents[name] = Process(f"agent-{name}", self.agent_argv(name),
                                    log=self.logs / f"agent-{name}.log")

    def stop_agent(self, name: str) -> None:
        """Stop member `name`'s agent (its cluster goes silent)."""
        agent = self.agents.get(name)
        if agent is not None:
            self.report(f"stopping the agent of {name}")
            self.stopped.add(name)
            agent.stop()

    @property
    def metrics_url(self) -> str:
        """The coordinator's Prometheus metrics (plain HTTP on the loopback)."""
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def kubeconfig(self, name: str) -> str:
        """The kubeconfig of cluster `name` ("hub" or a member)."""
        assert self.sandbox is not None
        return self.sandbox.cluster(name).kubeconfig

    def failed(self) -> list[str]:
        """Processes that exited on their own, with the end of their logs."""
        running = [a for name, a in self.agents.items() if name not in self.stopped]
        found = [p for p in [self.coordinator, *running] if p is not None and not p.alive()]
        return [f"{p.name} exited ({p.log}):\n{p.tail()}" for p in found]

    # --- stop ----------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the agents and the coordinator (and its Ray), asked together so that each shuts
        down gracefully beside the others, then the sandbox. Safe to call twice."""
        processes = [*self.agents.values(), *([self.coordinator] if self.coordinator is not None else [])]
        for process in processes:
            process.terminate()
        for agent in self.agents.values():
            agent.stop()
        if self.coordinator is not None:
            self.coordinator.stop(timeout=30.0)
        if (self.directory / "sandbox" / state.STATE_FILE).exists():
            launcher.down(self.directory / "sandbox", remove=False)
