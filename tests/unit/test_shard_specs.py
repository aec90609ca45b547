"""What the SpreadShards keep between rounds (`coordinator.shard_specs`), both sides without Ray.

Why: a shard that used a spec, a pod shape or a template other than the coordinator's would place
a spread by an old rule or send its agents an old template. The coordinator's `SentSpecs` and the
shard's `HeldSpecs` must agree round after round on what the shard holds: a spec and pod shape are
left out of a request, a spec's message parts and template out of a message's inputs, only when
the shard holds those very objects; an edited spread's new objects always go, a spread absent from
a round is forgotten on both sides, and a shard that lacks what a token names (restarted) refuses
the call rather than guess.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
from hypothesis import given, settings

from federation.api import spread as spread_api
from federation.coordinator import shard_specs
from federation.coordinator.model import loop
from federation.coordinator.wire import assignments
from federation.core import fit, placement_inputs, pod_shape
from tests.support import builders
from tests.unit import strategies


def spec(cap: int = 2) -> spread_api.FederatedSpreadSpec:
    return builders.spread_spec({"name": "ring", "clusters": ["dc1"], "maxReplicas": cap},
                                {"name": "eu", "clusters": ["aws-eu"]})


def request(key: str, made: spread_api.FederatedSpreadSpec, replicas: int = 3, *,
            shape: fit.PodShape | None = None) -> loop.PlaceRequest:
    return loop.PlaceRequest(key=key, spec=made, replicas=replicas,
                             inputs=placement_inputs.PlacementInputs(current={"ring": {"dc1": 1}},
                                                                     shape=shape))


def shape(cpu: str = "500m") -> fit.PodShape:
    return pod_shape.shape_from_pod_spec({"containers": [{"name": "app", "image": "app:1",
                                                          "resources": {"requests": {"cpu": cpu}}}]})


def inputs(key: str, made: spread_api.FederatedSpreadSpec, *, template: dict[str, object] | None = None,
           generation: int = 1) -> assignments.MessageInputs:
    trimmed = template if template is not None else {"spec": {"template": {"spec": {"containers": []}}}}
    text = assignments.template_text(trimmed)
    return assignments.MessageInputs(key=key, generation=generation, uid="u1",
                                     spec=assignments.parts_of(made, key=key), template=text,
                                     revision=assignments.revision_of_text(text))


class Pair:
    """One shard's two sides: what the coordinator sends and what the shard rebuilds."""

    def __init__(self) -> None:
        self.sent = shard_specs.SentSpecs(shard_specs.tokens())
        self.held = shard_specs.HeldSpecs()
        self.rounds = 0

    def round(self, requests: Sequence[loop.PlaceRequest]) -> list[shard_specs.Shipped]:
        """One round of `requests` (none: the round sent this shard nothing); what was shipped."""
        self.rounds += 1
        self.sent.start()
        shipped = [self.sent.ship(r) for r in requests]
        if shipped:
            whole = self.held.requests(f"round-{self.rounds}", shipped)
            assert whole == list(requests)
            assert all(w.inputs.shape is r.inputs.shape for w, r in zip(whole, requests, strict=True))
        return shipped

    def messages(self, items: Sequence[assignments.MessageInputs | None],
                 ) -> list[shard_specs.ShippedInputs | None]:
        """The round's message inputs after its requests (`round`), rebuilt on the shard; what was shipped."""
        shipped = [self.sent.ship_inputs(item) for item in items]
        whole = self.held.message_inputs(f"round-{self.rounds}", shipped)
        assert whole == list(items)
        assert all(w is None or (w.spec is i.spec and w.template is i.template)
                   for w, i in zip(whole, items, strict=True) if i is not None)
        return shipped


def test_a_spec_goes_once_and_then_only_its_token() -> None:
    pair = Pair()
    specs = {"ns/a": spec(), "ns/b": spec(3)}
    first = pair.round([request(k, s) for k, s in specs.items()])
    assert all(item.spec == shard_specs.spec_text(specs[item.key]) for item in first)
    again = pair.round([request(k, s, replicas=5) for k, s in specs.items()])  # the shard rebuilds them whole
    assert [item.spec for item in again] == [None, None]
    assert [item.token for item in again] == [item.token for item in first]
    assert pair.sent.holds() == 2


def test_an_edited_spread_sends_its_new_spec_under_a_new_token_even_when_equal() -> None:
    pair = Pair()
    old = spec()
    first = pair.round([request("ns/a", old)])
    edited = spec()  # equal content, another object: the World replaced it
    assert edited == old and edited is not old
    shipped = pair.round([request("ns/a", edited)])
    assert shipped[0].spec is not None and shipped[0].token != first[0].token


def test_a_spread_absent_from_a_round_is_forgotten_on_both_sides() -> None:
    pair = Pair()
    kept, gone = spec(), spec(4)
    pair.round([request("ns/a", kept), request("ns/b", gone)])
    pair.round([request("ns/a", kept)])  # ns/b deleted, or not in this round
    back = pair.round([request("ns/a", kept), request("ns/b", gone)])
    assert back[0].spec is None, "ns/a was in the round before"
    assert back[1].spec == shard_specs.spec_text(gone), "ns/b was not: the shard lost it, so it goes again"


def test_a_round_that_sent_this_shard_nothing_keeps_what_it_holds() -> None:
    pair = Pair()
    made = spec()
    pair.round([request("ns/a", made)])
    pair.round([])
    assert pair.round([request("ns/a", made)])[0].spec is None


def test_a_restarted_shard_refuses_a_round_that_relies_on_what_it_lost() -> None:
    pair = Pair()
    made, other = spec(), spec(5)
    pair.round([request("ns/a", made)])
    pair.held = shard_specs.HeldSpecs()  # the actor was restarted: it holds nothing
    pair.sent.start()
    shipped = [pair.sent.ship(request("ns/a", made)), pair.sent.ship(request("ns/c", other))]
    with pytest.raises(shard_specs.SpecsMissing, match=r"1 specs not held here .*ns/a"):
        pair.held.requests("round-2", shipped)
    pair.sent.forget()  # what the backend does when a round's call fails
    pair.rounds += 1
    again = pair.round([request("ns/a", made), request("ns/c", other)])
    assert [item.spec for item in again] == [shard_specs.spec_text(made), shard_specs.spec_text(other)]


def test_a_token_the_shard_holds_for_another_spec_is_refused() -> None:
    held = shard_specs.HeldSpecs()
    made = spec()
    text = shard_specs.spec_text(made)
    held.requests("r1", [shard_specs.Shipped(key="ns/a", token=1, spec=text, replicas=1, view=None,
                                             inputs=placement_inputs.PlacementInputs())])
    with pytest.raises(shard_specs.SpecsMissing):
        held.requests("r2", [shard_specs.Shipped(key="ns/a", token=2, spec=None, replicas=1, view=None,
                                                 inputs=placement_inputs.PlacementInputs())])


def test_the_shards_of_one_backend_never_share_a_token() -> None:
    tokens = shard_specs.tokens()
    sides = [shard_specs.SentSpecs(tokens) for _ in range(3)]
    made = spec()
    found = [side.ship(request(f"ns/{i}-{j}", made)).token for i, side in enumerate(sides) for j in range(2)]
    assert len(set(found)) == len(found)


def test_a_what_if_request_is_not_shipped() -> None:
    sent = shard_specs.SentSpecs(shard_specs.tokens())
    what_if = loop.PlaceRequest(key="ns/a", spec=spec(), replicas=1, snapshot=builders.snapshot())
    with pytest.raises(ValueError, match="snapshot"):
        sent.ship(what_if)


def test_a_pod_shape_goes_with_its_spec_once_and_is_then_left_out() -> None:
    pair = Pair()
    made, held = spec(), shape()
    first = pair.round([request("ns/a", made, shape=held)])
    assert first[0].spec == shard_specs.spec_text(made) and first[0].inputs.shape is held
    again = pair.round([request("ns/a", made, shape=held)])  # the shard puts the shape back (asserted)
    assert again[0].spec is None and again[0].inputs.shape is None
    assert pair.sent.specs_shipped == 1


def test_a_new_pod_shape_sends_spec_and_shape_again_under_a_new_token() -> None:
    pair = Pair()
    made = spec()
    first = pair.round([request("ns/a", made, shape=shape())])
    changed = shape("750m")  # the template changed; the spec did not
    again = pair.round([request("ns/a", made, shape=changed)])
    assert again[0].spec == shard_specs.spec_text(made) and again[0].inputs.shape is changed
    assert again[0].token != first[0].token


def test_message_parts_and_template_go_once_and_then_only_their_token() -> None:
    pair = Pair()
    made = spec()
    sent = inputs("ns/a", made)
    pair.round([request("ns/a", made)])
    first = pair.messages([sent, None])  # a Job's inputs stay None
    assert first[1] is None and first[0] is not None and first[0].parts == (sent.spec, sent.template)
    pair.round([request("ns/a", made)])
    later = dataclasses.replace(sent, generation=2)  # the same parts and template objects
    again = pair.messages([later, None])
    assert again[0] is not None and again[0].parts is None and again[0].token == first[0].token
    assert again[0].inputs.template is shard_specs.NO_TEMPLATE
    assert again[0].inputs.spec is shard_specs.NO_PARTS
    assert pair.sent.templates_shipped == 1


def test_an_edited_template_is_sent_again_even_when_equal() -> None:
    pair = Pair()
    made = spec()
    pair.round([request("ns/a", made)])
    first = pair.messages([inputs("ns/a", made)])
    pair.round([request("ns/a", made)])
    edited = inputs("ns/a", made)  # equal, but the World built it anew
    again = pair.messages([edited])
    assert again[0] is not None and again[0].parts is not None and again[0].parts[1] is edited.template
    assert first[0] is not None and again[0].token != first[0].token


def test_a_restarted_shard_refuses_message_inputs_it_lost_and_the_next_round_sends_them() -> None:
    pair = Pair()
    made = spec()
    sent = inputs("ns/a", made)
    pair.round([request("ns/a", made)])
    pair.messages([sent])
    pair.held = shard_specs.HeldSpecs()  # restarted between two rounds
    pair.rounds += 1
    pair.sent.start()
    shipped = [pair.sent.ship_inputs(sent)]
    with pytest.raises(shard_specs.SpecsMissing, match=r"1 templates not held here .*ns/a"):
        pair.held.message_inputs(f"round-{pair.rounds}", shipped)
    shard_specs.forget_all([pair.sent])  # what the backend's wait does when the messages fail
    pair.round([request("ns/a", made)])
    assert [item.parts for item in pair.messages([sent]) if item is not None] == [(sent.spec, sent.template)]


@settings(max_examples=300, deadline=None)
@given(made=strategies.spreads(["dc1", "dc2", "aws-eu", "aws-us"], patches=True))
def test_a_spec_sent_as_text_is_the_spec_again(made: spread_api.FederatedSpreadSpec) -> None:
    """A shard places by the spec it reads back from `spec_text`: it must be the coordinator's spec,
    field for field (every subset kind, cap, selector, term, toleration, patch and strategy drawn)."""
    back = shard_specs.spec_of(shard_specs.spec_text(made))
    assert back == made
    assert back.model_dump() == made.model_dump()


def test_a_plans_profiles_go_once_without_their_pod_spec_and_without_the_shape() -> None:
    """A round's request carries its plan's profiles: the shard is sent them without the pod spec
    their shapes were read from, and not the shape (it reads nothing else of the pods); a profile
    two subsets share stays one object; the next round sends neither."""
    made, pods = spec(), shape()
    shared = fit.profile(pods)
    full = loop.PlaceRequest(key="ns/a", spec=made, replicas=3, inputs=placement_inputs.PlacementInputs(
        current={"ring": {"dc1": 1}}, shape=pods, profiles=(shared, shared)))
    assert pods.pod is not None
    sent = shard_specs.SentSpecs(shard_specs.tokens())
    held = shard_specs.HeldSpecs()
    sent.start()
    first = sent.ship(full)
    assert first.inputs.shape is None and first.inputs.profiles is None and first.profiles is not None
    assert first.profiles[0] is first.profiles[1] and first.profiles[0].shape.pod is None
    assert (first.profiles[0].requests, first.profiles[0].admission) == (shared.requests, shared.admission)
    assert first.profiles[0].shape == pods  # what admission reads: selector, terms, tolerations, requests
    whole = held.requests("r1", [first])[0]
    assert whole.inputs.profiles == first.profiles and whole.inputs.shape is None
    assert whole.spec == made and whole.inputs.current == full.inputs.current
    sent.start()
    again = sent.ship(full)
    assert again.spec is None and again.profiles is None and again.inputs.profiles is None
    assert held.requests("r2", [again])[0].inputs.profiles == first.profiles


def test_profiles_already_without_a_pod_spec_are_sent_as_they_are() -> None:
    bare = fit.profile(fit.PodShape())
    assert shard_specs.light_profiles((bare,))[0] is bare
