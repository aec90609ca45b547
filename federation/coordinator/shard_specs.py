"""What the SpreadShards keep from one round to the next, so a round sends only what changed: each
spread's spec and its pods (its plan's profiles, or a pod shape) for its placement, its spec's
message parts and trimmed template for its agents' messages.

Why: a full round on Ray sends every spread's request to the shards, and then the inputs of its
agents' messages. Each request carried its spec, a pydantic model, and its pod shape, which holds
the template's whole pod spec (a subset's patch is applied to it); each message's inputs carried
the trimmed template again. All of it was pickled by the coordinator's placing thread and unpickled
by a shard every round, for objects that had not changed since the last one. With a real pod spec
(about 2 kB) they were most of a round's bytes (docs/decisions.md, "the shards keep their specs
between rounds", "the shards hold the pod shapes and templates too"). Now the coordinator's
`SentSpecs` remembers, per shard, which objects it sent for each spread in the last round under
which token, and sends them only when the shard cannot hold them (a new spread, an edited one, a
shard that failed): a request goes as a `Shipped`, a message's inputs as a `ShippedInputs`. The
shard's `HeldSpecs` keeps what its last round and the round in flight used, and gives the requests
and inputs back whole.

What does go, goes as text where it can: a spec as its JSON (`spec_text`: pydantic's compiled
serializer, where pickling a spec ran a Python hook per model on the coordinator's thread), a
template as the text every message carries anyway (`assignments.template_text`); a string pickles
as one copy of its bytes (docs/decisions.md, "the shards are sent text").

Do no harm: held objects are reused only on an exact token match. A token is never reused (a
counter per backend), and it names the very objects it was sent with: the World replaces a
spread's spec, and with its template the pod shape, trimmed template and spec parts built from it,
never edits them (the `Delivery` caches rely on that too). A shard that lacks what a token names —
it was restarted, or a call that carried the objects never reached it — raises `SpecsMissing` and
answers nothing: a round is then placed in the coordinator (`loop.BatchUnavailable`, through the
backend's wait), its messages built there, and the backend forgets what every shard holds
(`SentSpecs.forget`), so the next round sends everything again. What a shard holds is only what
its last round used: a deleted spread's objects are gone after the next round, on both sides alike.

No Ray import: the backend (`shards.RayBackend`) and the actor body (`shards.SpreadShard`) call it.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Sequence
from typing import Any

from federation.api import spread
from federation.coordinator.model import loop
from federation.coordinator.wire import assignments
from federation.core import fit, placement, placement_inputs
from federation.rpc import assignment


class SpecsMissing(Exception):
    """A shard was sent a token for objects it does not hold: the round is placed in the coordinator."""


@dataclasses.dataclass(frozen=True)
class Shipped:
    """A `loop.PlaceRequest` as a SpreadShard receives it: `spec` (its JSON, `spec_text`) only when
    the shard may not hold the spec and pods named by `token`; when it is None, `inputs.shape` and
    `inputs.profiles` are left out too. A request with its plan's profiles goes with them alone,
    without their pod spec (`light_profiles`), and without its shape: the shard reads nothing else
    of its pods."""

    key: str
    token: int
    spec: str | None
    replicas: int
    view: placement.View | None
    inputs: placement_inputs.PlacementInputs
    profiles: tuple[fit.Profile, ...] | None = None


@dataclasses.dataclass(frozen=True)
class ShippedInputs:
    """A spread's `assignments.MessageInputs` as a SpreadShard receives it: `parts` (its spec parts
    and trimmed template) only when the shard may not hold those named by `token`; `inputs` carries
    stand-ins for them (`NO_PARTS`, `NO_TEMPLATE`) when it is None."""

    token: int
    parts: tuple[assignments.SpecParts, str] | None
    inputs: assignments.MessageInputs


NO_PARTS = assignments.SpecParts(workload="", api_version="", kind="", strategy=assignment.Strategy(),
                                 rules=(), propagate_dependencies=False)
"""What a shipped message input holds in place of the spec parts the shard holds."""
NO_TEMPLATE = ""
"""What a shipped message input holds in place of the template the shard holds."""


def spec_text(made: spread.FederatedSpreadSpec) -> str:
    """A spec as a request carries it to a shard: its JSON, made by pydantic's compiled serializer.
    Pickled, the spec's every model ran a Python hook on the coordinator's thread (about 0.25 s per
    10,000 specs); its text is one string (docs/decisions.md, "the shards are sent text")."""
    return made.model_dump_json()


def light_profiles(profiles: tuple[fit.Profile, ...]) -> tuple[fit.Profile, ...]:
    """`profiles` without the pod spec their shapes were read from (`PodShape.pod`, a kilobyte or
    more of a real template): a round's check reads a profile's requests, admission key and the
    shape's selector, terms and tolerations only. A profile shared by several subsets stays shared."""
    made: dict[int, fit.Profile] = {}
    for profile in profiles:
        if id(profile) not in made:
            made[id(profile)] = profile if profile.shape.pod is None else fit.Profile(
                dataclasses.replace(profile.shape, pod=None), profile.requests, profile.admission)
    return tuple(made[id(profile)] for profile in profiles)


def spec_of(text: str) -> spread.FederatedSpreadSpec:
    """The spec `spec_text` made `text` of (equal to it: `test_shard_specs`' round trip)."""
    return spread.FederatedSpreadSpec.model_validate_json(text)


class _Sent:
    """Which objects the coordinator sent one shard for each spread under which token, for the round
    in flight and the round before (`start` begins a round)."""

    def __init__(self, tokens: Iterator[int]) -> None:
        self._tokens = tokens
        self._last: dict[str, tuple[tuple[object, ...], int]] = {}
        self._this: dict[str, tuple[tuple[object, ...], int]] = {}
        self.shipped = 0
        """How many times objects went to this shard, ever (the other times, a token went alone)."""

    def start(self) -> None:
        self._last, self._this = self._this or self._last, {}

    def forget(self) -> None:
        self._last, self._this = {}, {}

    def token_for(self, key: str, objects: tuple[object, ...]) -> tuple[int, bool]:
        """Spread `key`'s token for `objects`, and whether the shard holds those very objects."""
        held = self._this.get(key) or self._last.get(key)
        if held is not None and len(held[0]) == len(objects) and all(
                a is b for a, b in zip(held[0], objects, strict=True)):
            token, holds = held[1], True
        else:
            token, holds = next(self._tokens), False
            self.shipped += 1
        self._this[key] = (objects, token)
        return token, holds

    def holds(self) -> int:
        return len(self._this or self._last)


class SentSpecs:
    """The coordinator's side, for one shard: what it sent for the requests and for the messages."""

    def __init__(self, tokens: Iterator[int]) -> None:
        self._requests = _Sent(tokens)
        self._messages = _Sent(tokens)

    @property
    def specs_shipped(self) -> int:
        """How many requests carried their spec and pods (profiles or shape) to this shard, ever."""
        return self._requests.shipped

    @property
    def templates_shipped(self) -> int:
        """How many message inputs carried their spec parts and template to this shard, ever."""
        return self._messages.shipped

    def start(self) -> None:
        """A new round: what the shard holds from now on is what the round before used."""
        self._requests.start()
        self._messages.start()

    def forget(self) -> None:
        """The shard may hold nothing (a call failed): everything is sent again."""
        self._requests.forget()
        self._messages.forget()

    def ship(self, request: loop.PlaceRequest) -> Shipped:
        """`request` as the shard receives it: without its spec and pods when the shard holds those
        very objects; with its plan's profiles, light and without the shape (`Shipped`)."""
        if request.snapshot is not None:
            raise ValueError(f"request {request.key!r} carries a snapshot: only a round's requests go")
        inputs = request.inputs
        token, holds = self._requests.token_for(request.key, (request.spec, inputs.shape, inputs.profiles))
        profiles = None if holds or inputs.profiles is None else light_profiles(inputs.profiles)
        shape = None if holds or inputs.profiles is not None else inputs.shape
        if inputs.shape is not shape or inputs.profiles is not None:
            inputs = dataclasses.replace(inputs, shape=shape, profiles=None)
        return Shipped(key=request.key, token=token, spec=None if holds else spec_text(request.spec),
                       replicas=request.replicas, view=request.view, inputs=inputs, profiles=profiles)

    def ship_inputs(self, inputs: assignments.MessageInputs | None) -> ShippedInputs | None:
        """A spread's message inputs as the shard receives them: without its spec parts and
        template when the shard holds those very objects (None stays None: a Job)."""
        if inputs is None:
            return None
        token, holds = self._messages.token_for(inputs.key, (inputs.spec, inputs.template))
        if holds:
            return ShippedInputs(token=token, parts=None, inputs=dataclasses.replace(
                inputs, spec=NO_PARTS, template=NO_TEMPLATE))
        return ShippedInputs(token=token, parts=(inputs.spec, inputs.template), inputs=inputs)

    def holds(self) -> int:
        """How many spreads' specs the shard is taken to hold (for tests and logs)."""
        return self._requests.holds()


def forget_all(sides: Sequence[SentSpecs]) -> None:
    """A call of a round failed: it may not have reached its shard, so every shard is sent all again."""
    for side in sides:
        side.forget()


def tokens() -> Iterator[int]:
    """A backend's tokens: never one twice."""
    return itertools.count(1)


class _Held:
    """The shard's side of one kind of objects: those of the round in flight and the round before."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[int, tuple[Any, ...]]] = {}
        self._this: dict[str, tuple[int, tuple[Any, ...]]] = {}

    def rotate(self) -> None:
        self._last, self._this = self._this or self._last, {}

    def get(self, key: str, token: int) -> tuple[Any, ...] | None:
        held = self._this.get(key) or self._last.get(key)
        return held[1] if held is not None and held[0] == token else None

    def keep(self, found: Sequence[tuple[str, int, tuple[Any, ...]]]) -> None:
        for key, token, objects in found:
            self._this[key] = (token, objects)


class HeldSpecs:
    """The shard's side: what the round in flight and the round before used."""

    def __init__(self) -> None:
        self._round = ""
        self._requests = _Held()
        self._messages = _Held()

    def _begin(self, round_id: str) -> None:
        if round_id != self._round:
            self._round = round_id
            self._requests.rotate()
            self._messages.rotate()

    def requests(self, round_id: str, shipped: Sequence[Shipped]) -> list[loop.PlaceRequest]:
        """The requests whole again, the specs and pods (profiles, or shapes) they lack taken from
        what this shard holds (`SpecsMissing`, nothing kept from this call, when one is not held
        under its token)."""
        self._begin(round_id)
        found: list[tuple[str, int, tuple[Any, ...]]] = []
        missing: list[str] = []
        for item in shipped:
            held = (spec_of(item.spec), item.inputs.shape, item.profiles) if item.spec is not None \
                else self._requests.get(item.key, item.token)
            if held is None:
                missing.append(item.key)
            else:
                found.append((item.key, item.token, held))
        _refuse(missing, what="specs")
        self._requests.keep(found)
        return [loop.PlaceRequest(
            key=item.key, spec=spec, replicas=item.replicas, view=item.view,
            inputs=item.inputs if shape is item.inputs.shape and profiles is None
            else dataclasses.replace(item.inputs, shape=shape, profiles=profiles))
            for item, (_, _, (spec, shape, profiles)) in zip(shipped, found, strict=True)]

    def message_inputs(self, round_id: str, shipped: Sequence[ShippedInputs | None],
                       ) -> list[assignments.MessageInputs | None]:
        """The message inputs whole again, their spec parts and templates taken from what this
        shard holds (`SpecsMissing`, nothing kept, when one is not held under its token)."""
        self._begin(round_id)
        found: list[tuple[str, int, tuple[Any, ...]]] = []
        missing: list[str] = []
        for item in shipped:
            if item is None:
                continue
            held = item.parts if item.parts is not None else self._messages.get(item.inputs.key, item.token)
            if held is None:
                missing.append(item.inputs.key)
            else:
                found.append((item.inputs.key, item.token, held))
        _refuse(missing, what="templates")
        self._messages.keep(found)
        whole: list[assignments.MessageInputs | None] = []
        kept = iter(found)
        for item in shipped:
            if item is None:
                whole.append(None)
                continue
            _, _, (spec, template) = next(kept)
            whole.append(item.inputs if item.parts is not None
                         else dataclasses.replace(item.inputs, spec=spec, template=template))
        return whole


def _refuse(missing: Sequence[str], *, what: str) -> None:
    if missing:
        raise SpecsMissing(f"{len(missing)} {what} not held here (e.g. {missing[0]!r}): "
                           f"the shard was restarted or missed a call")
