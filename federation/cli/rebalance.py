"""`fedspread rebalance NAMESPACE/NAME`: move a spread's replicas back to its preferred subsets, once.

Why a command: fedspread is stable by design — replicas that overflowed to a later subset stay
there when the preferred one has room again (`spec.rebalance.policy: Never`, the default). This
command makes one whole failback on demand, as `policy: WhenRoom` would by itself, without waiting
for its cooldown between steps: each step starts its new pods *above* the spread's total in the
higher-priority subset, and removes as many from the lowest-priority ones only once the new pods
are Ready (`federation.core.failback`). It asks the coordinator (PlacementService `Rebalance`, the
same connection flags as `fedspread get`), which plans it on its live view and keeps it going in
the spread's status, so a coordinator restart resumes it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from federation.cli import get, options

if TYPE_CHECKING:
    from federation import sdk


@click.command("rebalance")
@click.argument("name", metavar="[NAMESPACE/]NAME")
@get._namespace_option
@click.option("--dry-run", is_flag=True, help="Only print the steps; move nothing.")
@click.option("--max-surge", type=click.IntRange(min=1), default=None, metavar="N",
              help="At most N extra pods per step, above the total (default: the spread's "
                   "spec.rebalance.maxSurge, 1 unless set).")
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text for people; json for scripts ({\"spread\", \"policy\", \"started\", \"steps\"}).")
@get._connection_options
def rebalance_command(*, name: str, namespace: str | None, dry_run: bool, max_surge: int | None, output: str,
                      connection: get.Connection) -> None:
    """Move a spread's replicas back to its preferred subsets, surge first, once.

    Replicas that overflowed to a later subset (the preferred one was full, cordoned or away)
    stay there by default, even once the preferred subset has room again. This asks the running
    coordinator to move them back now, in steps: each step starts up to --max-surge new pods in
    the preferred subset above the spread's total, and removes as many from the last subsets
    only once the new pods are Ready — the Ready pods never drop below the spread's replicas.
    If the new pods are not Ready within the spread's rescheduleCriticalSeconds, the step is
    undone and the failback stops (the room was not real). Follow it in the spread's
    Rebalancing condition (kubectl describe federatedspread NAME).

    A spread with spec.rebalance.policy WhenRoom does this by itself, one step per
    cooldownSeconds; this command does it for any spread, without the cooldown. Needs `patch` on
    the spread (a --dry-run only `get`). Examples:

        fedspread rebalance shop/web --dry-run

        fedspread rebalance web -n shop --max-surge 2
    """
    key = get.spread_key(name, namespace)
    plan = get._ask(connection, lambda client: client.rebalance(key, dry_run=dry_run, max_surge=max_surge))
    if output == "json":
        click.echo(json.dumps(document(plan), indent=2))
    else:
        click.echo(describe(plan, dry_run=dry_run))
    if plan.steps and not dry_run and not plan.started:
        options.fail(f"the coordinator did not start the failback of {key}")


def document(plan: sdk.RebalancePlan) -> dict[str, object]:
    """The plan as JSON: every step's moves, pair by pair."""
    return {"spread": plan.spread, "policy": plan.policy, "started": plan.started,
            "steps": [[{"fromSubset": m.from_subset, "fromCluster": m.from_cluster, "toSubset": m.to_subset,
                        "toCluster": m.to_cluster, "replicas": m.replicas} for m in step]
                      for step in plan.steps]}


def describe(plan: sdk.RebalancePlan, *, dry_run: bool) -> str:
    """The plan for people: one line per step, then what happens now."""
    if not plan.steps:
        return f"{plan.spread}: nothing to move (the placement matches the one from scratch)"
    lines = [f"{plan.spread} (rebalance policy {plan.policy}): {len(plan.steps)} "
             f"step{'s' if len(plan.steps) != 1 else ''}, each surge first"]
    for number, step in enumerate(plan.steps, start=1):
        moves = "; ".join(f"{m.replicas} from {m.from_subset}/{m.from_cluster} to "
                          f"{m.to_subset}/{m.to_cluster}" for m in step)
        lines.append(f"  step {number}: {moves}")
    lines.append("dry run: nothing was started" if dry_run else
                 "started: follow the spread's Rebalancing condition (kubectl describe federatedspread)")
    return "\n".join(lines)
