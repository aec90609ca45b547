"""What a round's requests cost to ship to the SpreadShards, and what holding the member views on
the shards (only their changes sent) would save.

Why this benchmark: the Ray design asks whether the shards should keep a replica of the cluster
views (each `placement_view.Member`), updated by deltas, instead of receiving them inside every
request (`shard_specs.Shipped.view`). A member object is shared by every spread with equal pods
(`model.member_views`), so a chunk of requests pickles each member once, yet each chunk again. This
measures both ways on the same requests before any of it is built: the round's requests as they
are shipped today (`inline`), and the same views with each member replaced by a small integer
(`member-tokens`), which is the most that members held on the shards could save on the wire. It
does not count what the shard would then do to put each view together again.

How: bench/placement_world.py's federation, every spread placed once in-process (the crossover
benchmark's world), then a full round's requests built against one snapshot (`loop.request_for`,
as `loop.recompute` builds them), shipped as the Ray backend ships them
(`shard_specs.SentSpecs.ship`, the specs held from a round before), cut into chunks of
`shards.ROUND_CHUNK` per shard (`routing.group_by_shard`), and each chunk packed and unpacked
(`round_parts.pack`/`unpack`), both arms in turn, the order alternating; the collector tuned as in
the coordinator and the actors (`federation.collector`). Per arm: bytes, and the median of the
repetitions' pack and unpack seconds with min-max. Also the unpack time of each part of a request
alone (one pack of that part for every request), to say where the shards' time goes.

And what the shards' holding saves (`shard_specs`: a spread's spec and its plan's pod profiles,
its message parts and template, sent once and then named by a token): the same round's requests, and its agent
messages' inputs (`assignments.inputs_of`), as a first round ships them (a shard that holds
nothing), as every later round does, and as a later round did while the shards held only the
specs (`later-specs-only`: pod shapes in the requests, message inputs whole), in the same chunks,
the order rotating (`rounds`). With
`--pod-spec typical` each spread's pod carries what a real one does (about 2 kB of JSON:
`placement_world.Shape.pod_spec`), which travels with its template (and, in `later-specs-only`,
with the pod shape a request then carried).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench import placement_crossover, placement_world
from bench.placement_world import Shape
from federation import collector
from federation.coordinator import round_parts, shard_specs, shards
from federation.coordinator.model import loop, routing
from federation.coordinator.wire import assignments

SHAPE = Shape(spreads=10_000, clusters=1_000, per_spread=10, pools=2)
QUICK_SHAPE = Shape(spreads=200, clusters=50, per_spread=10, pools=2)
SHARDS = 2
"""The coordinator's default SpreadShards (`--spread-shards`)."""

PARTS: dict[str, Callable[[shard_specs.Shipped], object]] = {
    "view": lambda s: s.view,
    "view.members": lambda s: s.view.members if s.view is not None else None,
    "inputs": lambda s: s.inputs,
    "inputs.current": lambda s: s.inputs.current,
    "inputs.shape": lambda s: s.inputs.shape,
}


@dataclasses.dataclass(frozen=True)
class Shipments:
    """One round's requests and message inputs as a first round ships them and as a later one does."""

    first: list[shard_specs.Shipped]
    later: list[shard_specs.Shipped]
    first_inputs: list[shard_specs.ShippedInputs | None]
    later_inputs: list[shard_specs.ShippedInputs | None]
    specs_only: list[shard_specs.Shipped]
    """A later round's requests as they went while the shards held only the specs (pod shapes inline)."""
    whole_inputs: list[assignments.MessageInputs | None]
    """The message inputs as they went then: whole, every round."""


def shipments(shape: Shape) -> Shipments:
    """A full round's requests and message inputs, shipped twice to one side (the second time, the
    shard holds what the first sent)."""
    model = placement_crossover.build(shape)
    entries = [e for key in sorted(model.placements) if (e := model.spread(key)) is not None]
    model.lift_charges([e.key for e in entries])
    requests = [loop.request_for(model, e, replicas=e.replicas or 0, now=placement_crossover.NOW,
                                 kept=frozenset(), in_round=True) for e in entries]
    inputs = [assignments.inputs_of(e, now=placement_crossover.NOW) for e in entries]
    sent = shard_specs.SentSpecs(shard_specs.tokens())
    found: list[tuple[list[shard_specs.Shipped], list[shard_specs.ShippedInputs | None]]] = []
    for _ in range(2):
        sent.start()
        found.append(([sent.ship(r) for r in requests], [sent.ship_inputs(i) for i in inputs]))
    specs_only = [dataclasses.replace(item, inputs=dataclasses.replace(request.inputs, profiles=None))
                  for item, request in zip(found[1][0], requests, strict=True)]
    return Shipments(first=found[0][0], later=found[1][0], first_inputs=found[0][1], later_inputs=found[1][1],
                     specs_only=specs_only, whole_inputs=list(inputs))


def shipped_round(shape: Shape) -> list[shard_specs.Shipped]:
    """A full round's requests as the Ray backend ships them, specs held from the round before."""
    return shipments(shape).later


def member_tokens(items: Sequence[shard_specs.Shipped]) -> list[shard_specs.Shipped]:
    """`items` with each member view replaced by a number naming its object (what a shard holding
    the members would be sent instead)."""
    numbers: dict[int, int] = {}
    found = []
    for item in items:
        view = item.view
        if view is not None:
            members = {name: numbers.setdefault(id(m), len(numbers)) for name, m in view.members.items()}
            view = dataclasses.replace(view, members=members)  # type: ignore[arg-type]
        found.append(dataclasses.replace(item, view=view))
    return found


def chunks(items: Sequence[Any], *, shards_: int, size: int,
           keys: Sequence[str] | None = None) -> list[list[Any]]:
    """The calls a round makes: `size` requests at a time, each batch's requests per owning shard
    (`keys`: the items' spreads, when the items do not say)."""
    named = [item.key for item in items] if keys is None else list(keys)
    calls = []
    for start in range(0, len(items), size):
        batch = items[start:start + size]
        for offsets in routing.group_by_shard(named[start:start + size], shards=shards_):
            if offsets:
                calls.append([batch[o] for o in offsets])
    return calls


def _timed(calls: Sequence[Sequence[Any]]) -> tuple[int, float, float]:
    started = time.perf_counter()
    packed = [round_parts.pack(c) for c in calls]
    packing = time.perf_counter() - started
    started = time.perf_counter()
    for payload in packed:
        round_parts.unpack(payload)
    return sum(map(len, packed)), packing, time.perf_counter() - started


def _summary(values: Sequence[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4),
            "max": round(max(values), 4)}


def _held_rounds(made: Shipments, *, repetitions: int) -> dict[str, Any]:
    """A first round's shipments against a later one's, requests and message inputs alike, and a
    later round's as they went while the shards held only the specs; the order rotating."""
    keys = [item.key for item in made.first]
    rounds: dict[str, tuple[Sequence[Any], Sequence[Any]]] = {
        "first": (made.first, made.first_inputs), "later": (made.later, made.later_inputs),
        "later-specs-only": (made.specs_only, made.whole_inputs)}
    calls: dict[str, dict[str, list[list[Any]]]] = {
        name: {"requests": chunks(requests, shards_=SHARDS, size=shards.ROUND_CHUNK),
               "messages": chunks(inputs, shards_=SHARDS, size=shards.ROUND_CHUNK, keys=keys)}
        for name, (requests, inputs) in rounds.items()}
    samples: dict[str, dict[str, list[tuple[int, float, float]]]] = {
        name: {"requests": [], "messages": []} for name in rounds}
    for repetition in range(repetitions):
        for name in list(rounds)[repetition % len(rounds):] + list(rounds)[:repetition % len(rounds)]:
            for part, made_calls in calls[name].items():
                samples[name][part].append(_timed(made_calls))
    return {name: {part: {"bytes": found[0][0], "pack_s": _summary([s[1] for s in found]),
                          "unpack_s": _summary([s[2] for s in found]), "samples": found}
                   for part, found in parts.items()}
            for name, parts in samples.items()}


def measure(shape: Shape, *, repetitions: int, report: Callable[[str], None]) -> dict[str, Any]:
    """Both arms on one round's requests, `repetitions` times each, alternating; then a first
    round's shipments against a later one's."""
    report(f"building {shape.spreads} spreads on {shape.clusters} clusters and one round's requests")
    made = shipments(shape)
    items = made.later
    arms = {"inline": chunks(items, shards_=SHARDS, size=shards.ROUND_CHUNK),
            "member-tokens": chunks(member_tokens(items), shards_=SHARDS, size=shards.ROUND_CHUNK)}
    samples: dict[str, list[tuple[int, float, float]]] = {arm: [] for arm in arms}
    for repetition in range(repetitions):
        order = list(arms) if repetition % 2 == 0 else list(reversed(arms))
        for arm in order:
            samples[arm].append(_timed(arms[arm]))
        report(f"repetition {repetition + 1}/{repetitions} done")
    parts = {}
    for name, part in PARTS.items():
        _, _, unpacking = _timed([[part(item) for item in items]])
        parts[name] = round(unpacking, 4)
    return {
        "shape": shape.describe(), "requests": len(items), "calls": len(arms["inline"]),
        "distinct_members": len({id(m) for i in items if i.view for m in i.view.members.values()}),
        "arms": {arm: {"bytes": found[0][0], "pack_s": _summary([s[1] for s in found]),
                       "unpack_s": _summary([s[2] for s in found]), "samples": found}
                 for arm, found in samples.items()},
        "unpack_s_by_part": parts,
        "rounds": _held_rounds(made, repetitions=repetitions),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.round_shipping",
        description="Measure what a full round's requests cost to pickle and unpickle on their way to "
                    "the Ray SpreadShards, as shipped today and with every member view replaced by a "
                    "number (what keeping the member views on the shards could save at most); and a "
                    "first round's requests and message inputs against a later round's, whose "
                    "specs, pod shapes and templates the shards hold. Prints the record as JSON (and "
                    "writes it with --output); progress goes to stderr.")
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_SHAPE.spreads} spreads on {QUICK_SHAPE.clusters} clusters (seconds); "
                             f"default: {SHAPE.spreads:,} on {SHAPE.clusters:,} (about a minute)")
    parser.add_argument("--repetitions", type=int, default=5, help="times each arm is packed and unpacked")
    parser.add_argument("--pod-spec", choices=placement_world.POD_SPECS, default="minimal",
                        help="what each spread's pod carries besides its requests: minimal (a container "
                             "and its requests, as every earlier record) or typical (about 2 kB of JSON: "
                             "image, environment, probes, volumes)")
    parser.add_argument("--output", default=None, help="also write the record to this JSON file")
    from bench import run as runner

    runner.add_replace_option(parser)
    options = parser.parse_args(argv)
    if options.repetitions < 1:
        parser.error("--repetitions must be at least 1")
    if (refused := runner.kept_reference(options.output, replace=options.replace)) is not None:
        parser.error(refused)
    collector.tune()  # the thresholds of the coordinator and of the actors that unpickle
    started, commit = runner.now(), runner.commit()
    shape = dataclasses.replace(QUICK_SHAPE if options.quick else SHAPE, pod_spec=options.pod_spec)
    found = measure(shape, repetitions=options.repetitions,
                    report=lambda line: print(f"[round-shipping] {line}", file=sys.stderr, flush=True))
    record = runner.record_of("bench.round_shipping", argv or sys.argv[1:], started=started, commit=commit,
                              found=found)
    runner.publish(record, options.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
