"""The `fedspread` command group: the name, one-line help and home module of every command.

Why a table: listing commands must not import them (`federation.cli.lazy`); each command module
parses its own flags and imports what it needs when it runs. Keep the one-line help here in
step with the first line of each command's docstring (a unit test compares them).
"""

from __future__ import annotations

import click

from federation.cli.lazy import LazyCommand, LazyGroup

COMMANDS = {
    "agent": LazyCommand(
        "federation.cli.agent:agent_command",
        "Run the member agent: enforce this cluster's share of every spread, report what it has.",
        extra="agent"),
    "certs": LazyCommand(
        "federation.cli.certs:certs_group",
        "Issue certificates for mTLS between agents, the coordinator and SDK users."),
    "coordinator": LazyCommand(
        "federation.cli.coordinator:coordinator_command",
        "Run the coordinator: decide how many replicas each cluster gets, and keep deciding.",
        extra="coordinator"),
    "crds": LazyCommand(
        "federation.cli.crds:crds_command",
        "Generate the FederatedSpread and MemberCluster CRDs, and the API reference, from the models.",
        extra="coordinator"),
    "demo": LazyCommand(
        "federation.cli.demo:demo_command",
        "Run the whole federation on this machine and show one workload spreading over it.",
        extra="coordinator"),
    "get": LazyCommand(
        "federation.cli.get:get_group",
        "Show what the running coordinator decided (live, read-only)."),
    "rebalance": LazyCommand(
        "federation.cli.rebalance:rebalance_command",
        "Move a spread's replicas back to its preferred subsets, surge first, once."),
    "sandbox": LazyCommand(
        "federation.cli.sandbox:sandbox_group",
        "Run a local federation of real Kubernetes control planes (no Docker needed).",
        extra="coordinator"),
    "simulate": LazyCommand(
        "federation.cli.simulate:simulate_command",
        "Show where a FederatedSpread would place its replicas on a capacity snapshot."),
}


@click.group(cls=LazyGroup, lazy_commands=COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="fedspread")
def main() -> None:
    """fedspread: spread one Kubernetes workload's replicas across many clusters.

    A FederatedSpread lists ordered subsets (a cluster, a region or a node pool), each with an
    optional cap; replicas fill them in order and, with the Adaptive strategy, overflow to the
    next subset when one has no room.
    """
