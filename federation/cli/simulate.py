"""`fedspread simulate`: the placement core on files, no cluster needed.

Why: operators want to see what a spread will do before applying it, and a capacity snapshot
captured from a live federation can be replayed here. The JSON output has a stable shape
(scripts rely on it; `federation.api.placement_json`), each subset with the rules that decided its
number (`reasons`); `-o table` is for people, the same rules as its notes. `--current` reads a
document of any version (only names and clusters), one written before `reasons` too.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import sys
from typing import Any

import click
import rich.console
import rich.table

from federation import clock
from federation.api import problems, spread
from federation.cli.options import EXIT_USAGE, usage_error
from federation.core import failback, fit, jobs, placement, workload_kinds


def _kind(doc: Any) -> str:
    return str(doc.get("kind", "")) if isinstance(doc, dict) else ""


def load_inputs(
    spread_file: pathlib.Path, template_file: pathlib.Path | None
) -> tuple[spread.FederatedSpread, dict[str, Any] | None]:
    """The spread in SPREAD.yaml and its target workload (from --template or the same file): the
    first document of the kind its targetRef names (a Deployment, ReplicaSet, StatefulSet or Job; an
    Indexed Job is refused: its completion indexes cannot be divided)."""
    docs = problems.read_documents(spread_file)
    spreads = [d for d in docs if _kind(d) == spread.KIND]
    if len(spreads) != 1:
        found = ", ".join(_kind(d) or "?" for d in docs) or "nothing"
        raise problems.InvalidInput(str(spread_file), [problems.Problem(
            "", f"expected exactly one FederatedSpread document, found: {found}")])
    parsed = problems.validate(spread.FederatedSpread, spreads[0], what=str(spread_file))
    template_docs = problems.read_documents(template_file) if template_file else docs
    target_kind = parsed.spec.target_ref.kind
    targets = [d for d in template_docs if _kind(d) == target_kind]
    if template_file and not targets:
        raise problems.InvalidInput(str(template_file), [problems.Problem(
            "", f"expected a {target_kind} document (the spread's targetRef kind)")])
    if targets and target_kind == "Job":
        refused = jobs.unsupported_job_fields((targets[0].get("spec") or {}) if isinstance(
            targets[0].get("spec"), dict) else {})
        if refused:
            raise problems.InvalidInput(str(template_file or spread_file),
                                        [problems.Problem("", problem) for problem in refused])
    return parsed, (targets[0] if targets else None)


def _replicas(given: int | None, template: dict[str, Any] | None, *, kind: str = "Deployment") -> int:
    """The spread quantity: `--replicas`, else the template's `spec.replicas` (a Job's
    `spec.parallelism`, 1 when unset, as the apiserver defaults it)."""
    if given is not None:
        return given
    policy = workload_kinds.policy_for(spread.TARGET_API_VERSIONS[kind], kind)
    value = workload_kinds.template_quantity(policy, template)
    if value is not None:
        return value
    raise click.UsageError(f"give --replicas N, or a template workload with spec.{policy.quantity_field}")


def _current(path: pathlib.Path | None) -> dict[str, dict[str, int]]:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text())
        return {s["name"]: {c: int(n) for c, n in s["clusters"].items()} for s in data["subsets"]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise problems.InvalidInput(str(path), [problems.Problem(
            "", f"not a placement in the `simulate -o json` shape ({error})")]) from None


def render_table(result: placement.Placement, spec: spread.FederatedSpreadSpec) -> None:
    """Print the placement for people: subsets with caps, clusters and reasons, then totals."""
    console = rich.console.Console()
    table = rich.table.Table(title=f"{spec.target_ref.name}: {result.replicas} replicas "
                                   f"({spec.schedule_strategy.type})")
    for column in ("#", "subset", "cap", "capacity", "replicas", "clusters", "notes"):
        table.add_column(column, justify="right" if column in ("#", "cap", "capacity", "replicas")
                         else "left")
    for index, (sub, wanted) in enumerate(zip(result.subsets, spec.subsets, strict=True)):
        cap = "-" if sub.cap is None else str(sub.cap)
        if wanted.percent is not None:
            cap = f"{cap} ({wanted.percent}%)"
        table.add_row(
            str(index), sub.name, cap,
            "-" if sub.capacity is None else str(sub.capacity), str(sub.replicas),
            " ".join(f"{c}={n}" for c, n in sub.clusters.items()) or "-",
            "; ".join(sub.reason_texts),
        )
    console.print(table)
    console.print("clusters: " + ", ".join(f"{c}={n}" for c, n in result.clusters.items()))
    console.print(f"placed {result.placed}, unplaced {result.unplaced}, "
                  f"waiting for capacity {result.capacity_exhausted}")


@click.command("simulate")
@click.option("-f", "--filename", "spread_file", required=True,
              type=click.Path(dir_okay=False, path_type=pathlib.Path),
              help="FederatedSpread YAML (may also hold the target workload).")
@click.option("--clusters", "clusters_file", required=True,
              type=click.Path(dir_okay=False, path_type=pathlib.Path),
              help="Capacity snapshot YAML: clusters with labels, readiness, taints, node pools.")
@click.option("--replicas", type=click.IntRange(min=0),
              help="Total replicas (default: the template workload's spec.replicas).")
@click.option("--template", "template_file", type=click.Path(dir_okay=False, path_type=pathlib.Path),
              help="Workload YAML (of the targetRef's kind) whose pod requests, node selector and "
                   "tolerations are fitted "
                   "to nodes. Without it pods request nothing and only the pods limit binds.")
@click.option("--current", "current_file", type=click.Path(dir_okay=False, path_type=pathlib.Path),
              help="A previous `simulate -o json` output: replicas already placed stay put.")
@click.option("-o", "--output", type=click.Choice(["json", "table"]), default="json",
              show_default=True, help="json (stable, for scripts) or table (for people).")
def simulate_command(
    *,
    spread_file: pathlib.Path,
    clusters_file: pathlib.Path,
    replicas: int | None,
    template_file: pathlib.Path | None,
    current_file: pathlib.Path | None,
    output: str,
) -> None:
    """Show where a FederatedSpread would place its replicas on a capacity snapshot.

    Nothing is applied anywhere. Example:

        fedspread simulate -f examples/prefer-onprem.yaml --clusters clusters.yaml --replicas 40 -o table
    """
    try:
        parsed, template = load_inputs(spread_file, template_file)
        snapshot = problems.load_snapshot(clusters_file)
        shape = fit.shape_from_deployment(template)
        count = _replicas(replicas, template, kind=parsed.spec.target_ref.kind)
        now = clock.utcnow()
        result = placement.place(parsed.spec, replicas=count, snapshot=snapshot, shape=shape,
                                 current=_current(current_file), now=now)
        rebalance = None
        if current_file is not None:  # a failback is possible where the placement from scratch differs
            fresh = placement.place(parsed.spec, replicas=count, snapshot=snapshot, shape=shape, current={},
                                    now=now)
            rebalance, shown = failback.simulated(
                parsed.spec, replicas=count, current={s.name: s.clusters for s in result.subsets},
                from_scratch={s.name: s.clusters for s in fresh.subsets})
    except problems.InvalidInput as error:
        click.echo(str(error), err=True)  # every problem, one per line, with its field path
        sys.exit(EXIT_USAGE)
    except ValueError as error:  # e.g. an unparseable quantity in the template
        usage_error(str(error))
    if rebalance is not None:
        result = _moved(result, shown)
    if output == "json":
        click.echo(json.dumps(result.to_json(rebalance=rebalance), indent=2))
    else:
        render_table(result, parsed.spec)
        if rebalance is not None:
            moves = ", ".join(f"{m['from']} → {m['to']}: {m['replicas']}"
                              for m in rebalance["moves"])  # type: ignore[attr-defined]
            click.echo(f"rebalance ({rebalance['policy']}): {moves}"
                       + ("" if rebalance["policy"] == "WhenRoom" else
                          " — not made by itself (policy Never); `fedspread rebalance` would make it"))


def _moved(result: placement.Placement, shown: dict[str, dict[str, int]]) -> placement.Placement:
    """`result` with the counts a failback leads to (`shown`), its totals summed again."""
    subsets = tuple(dataclasses.replace(s, clusters=dict(shown.get(s.name, s.clusters)),
                                        replicas=sum(shown.get(s.name, s.clusters).values()))
                    for s in result.subsets)
    clusters = {name: sum(s.clusters.get(name, 0) for s in subsets) for name in result.clusters}
    return dataclasses.replace(result, subsets=subsets, clusters=clusters)

