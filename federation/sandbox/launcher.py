"""Start and stop the sandbox: one etcd, a hub apiserver and N member control planes.

Why this shape: the hub is an apiserver only, like Karmada's control plane, with our
CRDs; each member is an apiserver, a controller-manager (node-lifecycle off: simulated nodes have
no kubelet) and a scheduler, plus a node simulator that plays the kubelets. All apiservers share
one etcd, separated by `--etcd-prefix`, which keeps a 3-member sandbox near 2 GB. Everything binds
to loopback on free ports, authenticates with one admin token, and serves certificates from the
sandbox's own CA with SANs for 127.0.0.1 and localhost. Every apiserver, the hub's and the members',
presents a client certificate to admission webhooks (`admission`), so the coordinator's and the
agents' webhooks can refuse reviews from anyone else. Each member gets a default StorageClass, which
its node simulator's provisioner serves (`provisioner`). Every apiserver runs the aggregation layer
with a front-proxy CA of its own (`aggregation`); each member's node simulator serves
`metrics.k8s.io` behind it (`member_metrics`), and the hub's controller-manager runs the HPA
controller with sandbox periods (`hub_controllers`).

Every component is recorded with its command line, so one of them can be stopped and started
again exactly as it was (`stop_component`, `start_component`, `restart_component`): fault tests
restart a member's apiserver or take the hub away for a while, on the same port and etcd prefix.
"""

from __future__ import annotations

import concurrent.futures
import json
import pathlib
import secrets
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence

import yaml

from federation.certs import pki
from federation.sandbox import (
    admission,
    aggregation,
    build,
    hub_controllers,
    member_metrics,
    nodesim,
    provisioner,
    state,
)
from federation.sandbox.errors import SandboxError as SandboxError
from federation.sandbox.ports import free_port

READY_TIMEOUT = 90.0
Report = Callable[[str], None]


def _spawn(name: str, argv: Sequence[str], *, directory: pathlib.Path) -> state.Component:
    log = directory / "logs" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as sink:
        process = subprocess.Popen(
            list(argv), stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, cwd=directory,
        )
    started = None
    for _ in range(50):
        started = state.process_start_time(process.pid)
        if started is not None:
            break
        time.sleep(0.01)
    return state.Component(name=name, pid=process.pid, started=started or 0, log=str(log), argv=list(argv))


def _log_tail(component: state.Component, lines: int = 12) -> str:
    try:
        text = pathlib.Path(component.log).read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.strip().splitlines()[-lines:])


def _wait(what: str, check: Callable[[], bool], *, component: state.Component | None,
          timeout: float = READY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if component is not None and not component.alive():
            raise SandboxError(f"{component.name} exited while waiting for {what}; its log ends:\n"
                               f"{_log_tail(component)}")
        try:
            if check():
                return
        except (OSError, urllib.error.URLError, ValueError):
            pass
        time.sleep(0.25)
    detail = f"; {component.name} log ends:\n{_log_tail(component)}" if component else ""
    raise SandboxError(f"timed out after {timeout:.0f} s waiting for {what}{detail}")


def _get(url: str, *, token: str, ca_file: str, post: dict[str, object] | None = None) -> tuple[int, bytes]:
    """GET `url` (or POST the JSON document `post` to it): the status and the body."""
    context = ssl.create_default_context(cafile=ca_file)
    request = urllib.request.Request(
        url, headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        data=None if post is None else json.dumps(post).encode())
    try:
        with urllib.request.urlopen(request, context=context, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, b""


def kubeconfig(*, name: str, server: str, ca_pem: bytes, token: str) -> dict[str, object]:
    """A kubeconfig document for one sandbox cluster (admin token, CA embedded)."""
    import base64

    return {
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": {
            "server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
        "users": [{"name": f"{name}-admin", "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin"}}],
    }


class Launcher:
    """Brings a sandbox up in `directory` and records it in state.json."""

    def __init__(self, directory: pathlib.Path, tools: build.Toolset, report: Report) -> None:
        self.directory = directory
        self.tools = tools
        self.report = report
        self.pki_dir = directory / "pki"
        self.token = secrets.token_hex(16)
        self.ca = pki.CertificateAuthority.create("fedspread-sandbox-ca")
        self.state = state.SandboxState(directory=str(directory), etcd_port=free_port(),
                                        token=self.token, ca_file=str(self.pki_dir / "ca.crt"))
        self.front_proxy = aggregation.front_proxy_files(self.pki_dir)
        self.state.front_proxy_ca_file = str(self.front_proxy.ca_file)

    def _prepare(self) -> None:
        self.ca.pair().write(self.pki_dir, "ca")
        aggregation.write_front_proxy(self.pki_dir)
        pki.service_account_keys().write(self.pki_dir, "sa")
        tokens = self.pki_dir / "tokens.csv"
        tokens.write_text(f'{self.token},fedspread-admin,fedspread-admin,"system:masters"\n')
        tokens.chmod(0o600)

    def _start(self, name: str, argv: Sequence[str]) -> state.Component:
        component = _spawn(name, argv, directory=self.directory)
        self.state.components.append(component)
        self.state.save()
        return component

    def start_etcd(self) -> None:
        peer = free_port()
        port = self.state.etcd_port
        etcd = self._start("etcd", [
            str(self.tools.etcd), "--name", "sandbox", "--data-dir", str(self.directory / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{port}",
            "--advertise-client-urls", f"http://127.0.0.1:{port}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"sandbox=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync", "--log-level", "warn",
        ])

        def healthy() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                return b'"true"' in response.read()

        _wait("etcd health", healthy, component=etcd)

    def start_apiserver(self, name: str, role: str) -> tuple[state.ClusterRecord, state.Component]:
        port = free_port()
        serving = self.ca.issue_server(f"{name}-apiserver", dns_names=("localhost", "kubernetes"),
                                       ips=("127.0.0.1", "10.96.0.1"))
        cert, key = serving.write(self.pki_dir, f"{name}-apiserver")
        config = self.directory / name / "kubeconfig"
        config.parent.mkdir(parents=True, exist_ok=True)
        record = state.ClusterRecord(name=name, role=role, port=port, kubeconfig=str(config))
        config.write_text(yaml.safe_dump(kubeconfig(
            name=f"sandbox-{name}", server=record.server, ca_pem=self.ca.cert_pem, token=self.token)))
        # every apiserver presents a client certificate to webhooks (the coordinator's, the agents')
        config_file = admission.webhook_client_config(self.pki_dir, ca=self.ca, name=name)
        component = self._start(f"{name}-apiserver", [
            str(self.tools.binary("kube-apiserver")),
            f"--etcd-servers=http://127.0.0.1:{self.state.etcd_port}", f"--etcd-prefix=/{name}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={port}",
            "--insecure-port=0", f"--tls-cert-file={cert}", f"--tls-private-key-file={key}",
            f"--client-ca-file={self.pki_dir / 'ca.crt'}",
            f"--token-auth-file={self.pki_dir / 'tokens.csv'}", "--authorization-mode=RBAC",
            "--endpoint-reconciler-type=none", "--disable-admission-plugins=ServiceAccount",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={self.pki_dir / 'sa.crt'}",
            f"--service-account-signing-key-file={self.pki_dir / 'sa.key'}",
            "--service-cluster-ip-range=10.96.0.0/16", "--allow-privileged=true",
            f"--cert-dir={self.directory / name}", "--profiling=false", "--v=1",
            f"--admission-control-config-file={config_file}",
            *aggregation.apiserver_flags(self.front_proxy),
        ])
        self.state.clusters.append(record)
        self.state.save()
        return record, component

    def wait_apiserver(self, record: state.ClusterRecord, component: state.Component) -> None:
        ca_file = self.state.ca_file

        def ready() -> bool:
            status, _ = _get(f"{record.server}/readyz", token=self.token, ca_file=ca_file)
            return status == 200

        def default_namespace() -> bool:
            status, _ = _get(f"{record.server}/api/v1/namespaces/default", token=self.token, ca_file=ca_file)
            return status == 200

        _wait(f"{record.name} apiserver /readyz", ready, component=component)
        _wait(f"{record.name} default namespace", default_namespace, component=component)

    def start_member_controllers(self, record: state.ClusterRecord) -> list[state.Component]:
        config = record.kubeconfig
        manager = self._start(f"{record.name}-controller-manager", [
            str(self.tools.binary("kube-controller-manager")), f"--kubeconfig={config}",
            "--leader-elect=false", "--port=0", "--secure-port=0", "--controllers=*,-nodelifecycle",
            # The default 20 requests/s throttles a 300-pod scale to ~15 s; real clusters raise it too.
            "--kube-api-qps=100", "--kube-api-burst=200",
            f"--service-account-private-key-file={self.pki_dir / 'sa.key'}",
            f"--root-ca-file={self.pki_dir / 'ca.crt'}", "--use-service-account-credentials=false",
            "--v=1",
        ])
        scheduler = self._start(f"{record.name}-scheduler", [
            str(self.tools.binary("kube-scheduler")), f"--kubeconfig={config}",
            "--leader-elect=false", "--port=0", "--secure-port=0", "--v=1",
        ])
        return [manager, scheduler]

    def start_hub_controllers(self, record: state.ClusterRecord) -> state.Component:
        """The hub's controller-manager: namespace deletion, garbage collection, accounts and the
        HPA controller with sandbox periods (`hub_controllers`); no workload controller."""
        return self._start(f"{record.name}-controller-manager", [
            str(self.tools.binary("kube-controller-manager")), f"--kubeconfig={record.kubeconfig}",
            "--leader-elect=false", "--port=0", "--secure-port=0", *hub_controllers.controller_flags(),
            f"--service-account-private-key-file={self.pki_dir / 'sa.key'}",
            f"--root-ca-file={self.pki_dir / 'ca.crt'}", "--v=1",
        ])

    def start_nodesim(
        self, record: state.ClusterRecord, groups: Sequence[nodesim.NodeGroup]
    ) -> state.Component:
        profile = self.directory / record.name / "nodes.json"
        profile.write_text(nodesim.dump_profile(groups))
        record.metrics_port = free_port()  # recorded with the component below
        return self._start(f"{record.name}-nodesim", [
            sys.executable, "-m", "federation.sandbox.nodesim",
            "--kubeconfig", record.kubeconfig, "--profile", str(profile),
            *member_metrics.nodesim_args(self.pki_dir, ca=self.ca, cluster=record.name,
                                         port=record.metrics_port, client_ca=self.front_proxy.ca_file),
        ])

    def wait_member(self, record: state.ClusterRecord, manager: state.Component, nodes: int) -> None:
        ca_file = self.state.ca_file

        def service_account() -> bool:
            status, _ = _get(f"{record.server}/api/v1/namespaces/default/serviceaccounts/default",
                             token=self.token, ca_file=ca_file)
            return status == 200

        def nodes_ready() -> bool:
            status, body = _get(f"{record.server}/api/v1/nodes", token=self.token, ca_file=ca_file)
            return status == 200 and nodesim.count_ready_nodes(body) >= nodes

        def storage_class() -> bool:  # 409: there already (a restarted member keeps its etcd)
            status, _ = _get(f"{record.server}/apis/storage.k8s.io/v1/storageclasses", token=self.token,
                             ca_file=ca_file, post=provisioner.storage_class())
            return status in (201, 409)

        _wait(f"{record.name} default service account", service_account, component=manager)
        _wait(f"{record.name} default StorageClass", storage_class, component=None)
        _wait(f"{record.name} {nodes} ready nodes", nodes_ready, component=None)
        member_metrics.register(record.kubeconfig, port=record.metrics_port, ca_pem=self.ca.cert_pem)


def up(
    directory: pathlib.Path,
    *,
    members: Sequence[str],
    profiles: dict[str, list[nodesim.NodeGroup]],
    crds: Sequence[pathlib.Path] = (),
    report: Report,
) -> state.SandboxState:
    """Start a sandbox with a hub and `members`; on any failure stop what was started and raise."""
    if (directory / state.STATE_FILE).exists():
        previous = state.SandboxState.load(directory)
        if any(c.alive() for c in previous.components):
            raise SandboxError(f"a sandbox is already running in {directory}; "
                               "run `fedspread sandbox down` first")
    elif directory.exists() and any(directory.iterdir()):
        raise SandboxError(f"{directory} is not empty and holds no sandbox; give an empty or new --dir")
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    tools = build.ensure(report)
    launcher = Launcher(directory, tools, report)
    started = time.monotonic()
    try:
        launcher._prepare()
        launcher.start_etcd()
        names = [("hub", "hub"), *((m, "member") for m in members)]
        servers = [launcher.start_apiserver(n, role) for n, role in names]
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(servers)) as pool:
            list(pool.map(lambda pair: launcher.wait_apiserver(*pair), servers))
        report(f"apiservers ready in {time.monotonic() - started:.1f} s")
        launcher.start_hub_controllers(servers[0][0])
        waits = []
        for record, _ in servers[1:]:
            manager, _scheduler = launcher.start_member_controllers(record)
            launcher.start_nodesim(record, profiles[record.name])
            waits.append((record, manager, sum(g.count for g in profiles[record.name])))
        if crds:
            from federation.sandbox import hubsetup

            hubsetup.install_crds(launcher.state.hub.kubeconfig, crds)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(waits))) as pool:
            list(pool.map(lambda w: launcher.wait_member(*w), waits))
    except BaseException:
        down(directory, remove=False)
        raise
    report(f"sandbox ready in {time.monotonic() - started:.1f} s")
    return launcher.state


def down(directory: pathlib.Path, *, remove: bool = True) -> list[str]:
    """Stop every recorded component; return their names (newest first). Removes the directory.

    In tiers, each tier's components side by side (`state.stop_tiers`): an apiserver drains its watches
    for about a second when asked to stop, and four of them one after another made every test
    sandbox's teardown that much longer."""
    try:
        recorded = state.SandboxState.load(directory)
    except FileNotFoundError:
        return []
    running = [component for component in reversed(recorded.components) if component.alive()]
    for tier in state.stop_tiers(running):
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(tier)) as pool:
            list(pool.map(lambda component: component.stop(), tier))
    if remove:
        shutil.rmtree(directory, ignore_errors=True)
    return [component.name for component in running]


# --- one component at a time (fault tests: an apiserver restarted, the hub away for a while) -----


def _component(sandbox: state.SandboxState, name: str) -> tuple[int, state.Component]:
    for index, component in enumerate(sandbox.components):
        if component.name == name:
            return index, component
    known = ", ".join(c.name for c in sandbox.components)
    raise KeyError(f"no component {name!r} in the sandbox at {sandbox.directory} (it has {known})")


def stop_component(sandbox: state.SandboxState, name: str, *, crash: bool = False,
                   grace: float = 10.0) -> state.Component:
    """Stop one component (e.g. "member-1-apiserver"): SIGTERM, and SIGKILL if it is still running
    after `grace` seconds (a 1.20 apiserver drains its watches that long), or with `crash` SIGKILL
    at once. The sandbox keeps its record, so `start_component` starts it again the same way."""
    _, component = _component(sandbox, name)
    component.stop(grace=0 if crash else grace)
    return component


def start_component(sandbox: state.SandboxState, name: str, *,
                    timeout: float = READY_TIMEOUT) -> state.Component:
    """Start a stopped component again with its recorded command line (same port, flags, etcd
    prefix, log file), record the new process in state.json, and for an apiserver wait until
    /readyz answers; SandboxError if it exits or never gets ready."""
    index, old = _component(sandbox, name)
    if old.alive():
        raise SandboxError(f"{name} is still running (pid {old.pid}); stop it first")
    if not old.argv:
        raise SandboxError(f"{name} was recorded without its command line (an older sandbox); "
                           "start a new sandbox to restart single components")
    directory = pathlib.Path(sandbox.directory)
    component = _spawn(name, old.argv, directory=directory)
    sandbox.components[index] = component
    sandbox.save()
    served = {f"{c.name}-apiserver": c for c in sandbox.clusters}.get(name)
    if served is not None:
        def ready() -> bool:
            status, _ = _get(f"{served.server}/readyz", token=sandbox.token, ca_file=sandbox.ca_file)
            return status == 200

        _wait(f"{name} /readyz after a restart", ready, component=component, timeout=timeout)
    return component


def restart_component(sandbox: state.SandboxState, name: str, *, crash: bool = False,
                      down_seconds: float = 0.0, timeout: float = READY_TIMEOUT) -> state.Component:
    """`stop_component`, `down_seconds` with it away, then `start_component`."""
    stop_component(sandbox, name, crash=crash)
    time.sleep(down_seconds)
    return start_component(sandbox, name, timeout=timeout)
