"""`fedspread get placement|clusters`: what the running coordinator decided, from the command line.

Why through the SDK: the command line is the SDK's first user, so it exercises the same typed
results and errors scripts get. `-o json` prints the stable shape of `simulate -o json` plus
`"ready"`; `-o table` is for people. A malformed key is the user's mistake (one line, exit 2); an
unknown spread, a refusal (the certificate's user may not read it: the hub's RBAC decides) or an
unreachable coordinator is a run-time failure (one line, exit 1).

Transport as for every gRPC client: mTLS with a client certificate (`--ca/--cert/--key`, or
FEDSPREAD_CA/FEDSPREAD_CERT/FEDSPREAD_KEY, from `fedspread certs client`), or plaintext with an
explicit `--insecure`; neither is a usage error. The SDK (and so gRPC) is imported only when a
query runs, so `--help` stays fast.

kubectl's habits, because its users have them: `-n NAMESPACE NAME` (or `NAMESPACE/NAME`; the
namespace defaults to FEDSPREAD_NAMESPACE, else `default`), `-o table|wide|json|yaml`, and the
console script `kubectl-fedspread`, so `kubectl fedspread get placement web -n shop` works.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click
import rich.console
import rich.table
import yaml

from federation.cli import options
from federation.core import usage as usage_rules

if TYPE_CHECKING:
    from federation import sdk

DEFAULT_COORDINATOR = "127.0.0.1:7443"

T = TypeVar("T")

_coordinator_option = click.option(
    "--coordinator", envvar="FEDSPREAD_COORDINATOR", default=DEFAULT_COORDINATOR, show_default=True,
    metavar="HOST:PORT", help="The coordinator's PlacementService address (env FEDSPREAD_COORDINATOR).",
)
_output_option = click.option(
    "-o", "--output", type=click.Choice(["table", "wide", "json", "yaml"]), default="table",
    show_default=True,
    help="table or wide (more columns) for people; json or yaml (the same stable shape) for scripts.",
)
_namespace_option = click.option(
    "-n", "--namespace", envvar="FEDSPREAD_NAMESPACE", default=None, metavar="NAMESPACE",
    help="The spread's namespace, as with kubectl (env FEDSPREAD_NAMESPACE; default: default).",
)
DEFAULT_NAMESPACE = "default"
_timeout_option = click.option(
    "--timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
    help="Seconds to wait for the coordinator.",
)
_tls_options = options.compose(
    options.cert_key_ca_options(
        prefix="", envvar_prefix="FEDSPREAD_",
        ca_help="CA certificate that signed the coordinator's (env FEDSPREAD_CA).",
        cert_help="Your client certificate, from `fedspread certs client` (env FEDSPREAD_CERT).",
        key_help="Private key of --cert (env FEDSPREAD_KEY)."),
    options.insecure_option(
        envvar="FEDSPREAD_INSECURE",
        help_text="Plaintext instead of mTLS, for a coordinator started with --insecure."),
)


@dataclasses.dataclass(frozen=True)
class Connection:
    """How to reach the coordinator: address, deadline, and mTLS files (None: --insecure)."""

    target: str
    timeout: float
    ca: pathlib.Path | None
    cert: pathlib.Path | None
    key: pathlib.Path | None
    insecure: bool

    def check(self) -> None:
        """click.UsageError unless exactly one of mTLS (all three files) and --insecure is given."""
        options.mtls_files(flags=("--cert", "--key", "--ca"), cert=self.cert, key=self.key, ca=self.ca,
                           insecure=self.insecure, advice="issue them with `fedspread certs client`")

    def client(self) -> sdk.PlacementClient:
        """An SDK client over mTLS or plaintext."""
        from federation import sdk

        if self.ca is None or self.cert is None or self.key is None:
            return sdk.PlacementClient(self.target, timeout=self.timeout)
        return sdk.PlacementClient.with_tls(self.target, ca=self.ca, cert=self.cert, key=self.key,
                                            timeout=self.timeout)


def _connection_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--coordinator, --timeout and the TLS flags, passed to `command` as `connection`."""
    def wrapper(*, coordinator: str, timeout: float, ca_file: pathlib.Path | None,
                cert_file: pathlib.Path | None, key_file: pathlib.Path | None, insecure: bool,
                **rest: Any) -> Any:
        connection = Connection(coordinator, timeout, ca_file, cert_file, key_file, insecure)
        connection.check()
        return command(connection=connection, **rest)

    wrapper.__doc__, wrapper.__name__ = command.__doc__, command.__name__
    return options.compose(_coordinator_option, _timeout_option, _tls_options)(wrapper)


def _ask(connection: Connection, question: Callable[[sdk.PlacementClient], T]) -> T:
    """Run one query; a malformed request or a bad certificate file exits 2, any other SDK error
    (unknown spread, unreachable coordinator) exits 1; one line each."""
    from federation import sdk

    try:
        with connection.client() as client:
            return question(client)
    except sdk.InvalidRequest as error:
        options.usage_error(str(error).splitlines()[0])
    except sdk.CertificateError as error:  # a missing, malformed or mismatched --cert/--key/--ca file
        options.usage_error(str(error))
    except sdk.FedspreadError as error:
        options.fail(str(error))


def spread_key(name: str, namespace: str | None) -> str:
    """`NAMESPACE/NAME` from a `NAME` or `NAMESPACE/NAME` argument and `-n` (usage error when the
    two name different namespaces)."""
    given, slash, short = name.rpartition("/")
    if not slash:
        return f"{namespace or DEFAULT_NAMESPACE}/{name}"
    if namespace is not None and namespace != given:
        options.usage_error(f"{name!r} names namespace {given!r}, but -n says {namespace!r}: give one")
    return f"{given}/{short}"


def emit(document: Any, *, output: str) -> bool:
    """Print `document` as json or yaml when `output` asks for one (True), else nothing (False)."""
    if output == "json":
        click.echo(json.dumps(document, indent=2))
    elif output == "yaml":
        click.echo(yaml.safe_dump(document, sort_keys=False).rstrip())
    else:
        return False
    return True


def _cap(subset: sdk.SubsetPlacement) -> str:
    return subset.cap or "-"


def render_placement(result: sdk.SpreadPlacement, *, wide: bool = False) -> None:
    """Print a live placement for people: subsets with caps and ready/placed per cluster, totals
    (`wide`: also the ready pods per subset, the rules that decided each subset's number, as
    `simulate -o table` notes them, and when the coordinator computed it)."""
    console = rich.console.Console()
    title = f"{result.spread}: {result.replicas} replicas"
    if result.generation:
        title += f" (generation {result.generation})"
    table = rich.table.Table(title=title)
    columns = ["#", "subset", "cap", "replicas", "waiting", "clusters (ready/placed)"]
    if wide:
        columns.insert(4, "ready")
        columns.append("notes")
    for column in columns:
        left = column.startswith(("subset", "clusters", "notes"))
        table.add_column(column, justify="left" if left else "right")
    for index, sub in enumerate(result.subsets):
        clusters = " ".join(f"{c}={sub.ready.get(c, 0)}/{n}" for c, n in sub.clusters.items())
        row = [str(index), sub.name, _cap(sub), str(sub.replicas), str(sub.waiting), clusters or "-"]
        if wide:
            row.insert(4, str(sum(sub.ready.values())))
            row.append("; ".join(sub.reasons))
        table.add_row(*row)
    console.print(table)
    if wide and result.computed_at is not None:
        console.print(f"computed at {result.computed_at.isoformat(timespec='seconds')}")
    console.print("clusters: " + (", ".join(
        f"{c}={result.ready.get(c, 0)}/{n}" for c, n in result.clusters.items()) or "-"))
    console.print(f"placed {result.placed}, unplaced {result.unplaced}, "
                  f"waiting for capacity {result.capacity_exhausted}")
    for condition in result.conditions:
        line = f"{condition.type}={condition.status}"
        if condition.reason:
            line += f" {condition.reason}"
        if condition.message:
            line += f": {condition.message}"
        console.print(line, markup=False)
    if result.usage is not None and set(result.usage.metrics) - {usage_rules.READY_REPLICAS}:
        console.print(render_usage(result.usage), markup=False)  # what the hub's HPAs read
    for sub in result.subsets:
        if sub.revisions:  # a rollout runs: the subset's pods per template revision
            console.print(f"rolling out, {sub.name}: " + ", ".join(
                f"{revision} {count}" for revision, count in sub.revisions.items()), markup=False)


def render_usage(found: sdk.SpreadUsage) -> str:
    """One line: the usage the hub's HPAs see, over which pods, and the members left out."""
    line = "usage: " + (", ".join(f"{name} {value}" for name, value in found.metrics.items()) or "-")
    line += f" (over {found.ready_pods} Ready pods"
    if found.unmeasured_pods:
        line += f", {found.unmeasured_pods} counted at the average"
    line += ")"
    if found.without_metrics:
        line += "; no metrics API: " + ", ".join(found.without_metrics)
    if found.stale:
        line += "; stale: " + ", ".join(found.stale)
    return line


def render_clusters(found: list[sdk.ClusterInfo], *, wide: bool = False) -> None:
    """Print member clusters for people: health, cordon, size and agent (`wide`: also the labels,
    taints and node pools)."""
    console = rich.console.Console()
    table = rich.table.Table(title=f"{len(found)} member clusters")
    columns = ["name", "ready", "cordoned", "nodes", "cpu (req/alloc)", "memory (req/alloc)",
               "agent", "last heartbeat"]
    if wide:
        columns += ["labels", "taints", "pools"]
    for column in columns:
        table.add_column(column, justify="right" if column in ("nodes", "pools") else "left")
    for item in found:
        def used(resource: str, info: sdk.ClusterInfo = item) -> str:
            return f"{info.requested.get(resource, '0')}/{info.allocatable.get(resource, '0')}"

        row = [
            item.name, "yes" if item.ready else "NO", "yes" if item.cordoned else "no",
            str(item.node_count), used("cpu"), used("memory"), item.agent_version or "-",
            item.last_heartbeat.isoformat(timespec="seconds") if item.last_heartbeat else "never",
        ]
        if wide:
            row += [",".join(f"{k}={v}" for k, v in sorted(item.labels.items())) or "-",
                    ",".join(f"{t.key}:{t.effect}" for t in item.taints) or "-", str(len(item.node_pools))]
        table.add_row(*row)
    console.print(table)


@click.group("get")
def get_group() -> None:
    """Show what the running coordinator decided (live, read-only)."""


@get_group.command("placement")
@click.argument("name", metavar="NAME")
@_namespace_option
@_output_option
@_connection_options
def placement_command(*, name: str, namespace: str | None, output: str, connection: Connection) -> None:
    """Show where the replicas of FederatedSpread NAME are placed, and how many are ready.

    NAME is the spread's name in -n NAMESPACE (default: default), or NAMESPACE/NAME.

    \b
    Example, with certificates from `fedspread certs client --name alice --out pki/alice ...`:
      fedspread get placement web -n shop -o yaml \\
          --ca pki/alice/ca.crt --cert pki/alice/tls.crt --key pki/alice/tls.key
    As a kubectl plugin (the `kubectl-fedspread` script on PATH):
      kubectl fedspread get placement web -n shop
    """
    key = spread_key(name, namespace)
    result = _ask(connection, lambda client: client.placement(key))
    if not emit(result.to_json(), output=output):
        render_placement(result, wide=output == "wide")


@get_group.command("clusters")
@_output_option
@_connection_options
def clusters_command(*, output: str, connection: Connection) -> None:
    """List member clusters: ready, cordoned, nodes, requested/allocatable, agent, heartbeat."""
    found = _ask(connection, lambda client: client.clusters())
    if not emit({"clusters": [c.to_json() for c in found]}, output=output):
        render_clusters(found, wide=output == "wide")
