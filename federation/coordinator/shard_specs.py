"""The spreads' specs the SpreadShards keep from one round to the next, so a round sends only the
specs that changed.

Why: a full round on Ray sends every spread's request to the shards, and each request carried
its spec, a pydantic model, the costliest part of a request to pickle and unpickle, every round,
for specs that had not changed since the last one (what keeping them saves, measured:
docs/decisions.md, "the shards keep their specs between rounds"). Now the coordinator's
`SentSpecs` remembers, per shard, which spec object it sent for each spread in the last round
under which token, and a
request goes as a `Shipped`: the token, and the spec only when the shard cannot hold it (a new
spread, an edited one, a shard that failed). The shard's `HeldSpecs` keeps the specs of its last
round and of the round in flight, and gives the requests back whole.

Do no harm: a spec is reused only on an exact token match. A token is never reused (a counter per
backend), and it names one spec object: the World replaces a spread's spec when it changes, never
edits it (the `Delivery` caches rely on that too). A shard that lacks a spec — it was restarted,
or a call that carried the spec never reached it — raises `SpecsMissing` and places nothing; the
round is then placed in the coordinator (`loop.BatchUnavailable`, through the backend's wait), and
the backend forgets what every shard holds (`SentSpecs.forget`), so the next round sends every
spec again. What a shard holds is only what the last round used: a deleted spread's spec is gone
after the next round, on both sides alike.

No Ray import: the backend (`shards.RayBackend`) and the actor body (`shards.SpreadShard`) call it.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Sequence

from federation.api import spread
from federation.coordinator.model import loop
from federation.core import placement, placement_inputs


class SpecsMissing(Exception):
    """A shard was sent a token for a spec it does not hold: the round is placed in the coordinator."""


@dataclasses.dataclass(frozen=True)
class Shipped:
    """A `loop.PlaceRequest` as a SpreadShard receives it: `spec` only when the shard may not hold
    the spec named by `token`."""

    key: str
    token: int
    spec: spread.FederatedSpreadSpec | None
    replicas: int
    view: placement.View | None
    inputs: placement_inputs.PlacementInputs


class SentSpecs:
    """The coordinator's side, for one shard: which spec object it sent under which token, for the
    round in flight and the round before (`start` begins a round)."""

    def __init__(self, tokens: Iterator[int]) -> None:
        self._tokens = tokens
        self._last: dict[str, tuple[spread.FederatedSpreadSpec, int]] = {}
        self._this: dict[str, tuple[spread.FederatedSpreadSpec, int]] = {}
        self.specs_shipped = 0
        """How many requests carried their spec to this shard, ever (the others carried a token)."""

    def start(self) -> None:
        """A new round: what the shard holds from now on is what the round before used."""
        self._last, self._this = self._this or self._last, {}

    def forget(self) -> None:
        """The shard may hold nothing (a call failed): every spec is sent again."""
        self._last, self._this = {}, {}

    def ship(self, request: loop.PlaceRequest) -> Shipped:
        """`request` as the shard receives it: without its spec when the shard holds that very object."""
        if request.snapshot is not None:
            raise ValueError(f"request {request.key!r} carries a snapshot: only a round's requests go")
        held = self._this.get(request.key) or self._last.get(request.key)
        if held is not None and held[0] is request.spec:
            token, spec = held[1], None
        else:
            token, spec = next(self._tokens), request.spec
            self.specs_shipped += 1
        self._this[request.key] = (request.spec, token)
        return Shipped(key=request.key, token=token, spec=spec, replicas=request.replicas, view=request.view,
                       inputs=request.inputs)

    def holds(self) -> int:
        """How many specs the shard is taken to hold (for tests and logs)."""
        return len(self._this or self._last)


def tokens() -> Iterator[int]:
    """A backend's tokens: never one twice."""
    return itertools.count(1)


class HeldSpecs:
    """The shard's side: the specs of the round in flight and of the round before."""

    def __init__(self) -> None:
        self._round = ""
        self._last: dict[str, tuple[int, spread.FederatedSpreadSpec]] = {}
        self._this: dict[str, tuple[int, spread.FederatedSpreadSpec]] = {}

    def requests(self, round_id: str, shipped: Sequence[Shipped]) -> list[loop.PlaceRequest]:
        """The requests whole again, the specs they lack taken from what this shard holds
        (`SpecsMissing`, nothing kept from this call, when one is not held under its token)."""
        if round_id != self._round:
            self._round, self._last, self._this = round_id, self._this or self._last, {}
        found: list[tuple[Shipped, spread.FederatedSpreadSpec]] = []
        missing: list[str] = []
        for item in shipped:
            spec = item.spec
            if spec is None:
                held = self._this.get(item.key) or self._last.get(item.key)
                spec = held[1] if held is not None and held[0] == item.token else None
            if spec is None:
                missing.append(item.key)
            else:
                found.append((item, spec))
        if missing:
            raise SpecsMissing(f"{len(missing)} specs not held here (e.g. {missing[0]!r}): "
                               f"the shard was restarted or missed a call")
        for item, spec in found:
            self._this[item.key] = (item.token, spec)
        return [loop.PlaceRequest(key=item.key, spec=spec, replicas=item.replicas, view=item.view,
                                  inputs=item.inputs) for item, spec in found]
