"""What a round's requests cost to ship to the SpreadShards (`bench.round_shipping`), at a small size.

The benchmark's figures back design decisions (docs/decisions.md, "the member views are sent
inside the requests", "the shards hold the pod shapes and templates"), so what it compares must be
what it says: the round's requests as the Ray backend ships them, and the same requests with only
the member views replaced by numbers; a first round's requests and message inputs against a later
round's, which name what the shards hold; a typical pod that asks for what a minimal one does.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from bench import placement_world, round_shipping
from federation.core import pod_shape


def test_the_two_arms_differ_only_in_the_member_views() -> None:
    items = round_shipping.shipped_round(round_shipping.QUICK_SHAPE)
    assert len(items) == round_shipping.QUICK_SHAPE.spreads
    assert all(item.spec is None for item in items)  # the specs are held from the round before
    light = round_shipping.member_tokens(items)
    for before, after in zip(items, light, strict=True):
        assert before.view is not None and after.view is not None
        assert dataclasses.replace(after, view=before.view) == before
        assert dataclasses.replace(after.view, members=before.view.members) == before.view
        assert after.view.members.keys() == before.view.members.keys()
        assert all(isinstance(number, int) for number in after.view.members.values())
    shared = {id(m) for item in items if item.view for m in item.view.members.values()}
    assert {n for item in light if item.view for n in item.view.members.values()} == set(range(len(shared)))


def test_a_record_names_both_arms_and_every_request() -> None:
    found = round_shipping.measure(round_shipping.QUICK_SHAPE, repetitions=2, report=lambda _: None)
    assert found["requests"] == round_shipping.QUICK_SHAPE.spreads
    calls = round_shipping.chunks(round_shipping.shipped_round(round_shipping.QUICK_SHAPE),
                                  shards_=round_shipping.SHARDS, size=10)
    assert sum(map(len, calls)) == round_shipping.QUICK_SHAPE.spreads  # every request in one call
    arms = found["arms"]
    assert set(arms) == {"inline", "member-tokens"}
    assert arms["member-tokens"]["bytes"] < arms["inline"]["bytes"]
    assert all(len(arm["samples"]) == 2 for arm in arms.values())
    assert set(found["unpack_s_by_part"]) == set(round_shipping.PARTS)
    rounds = found["rounds"]
    assert set(rounds) == {"first", "later", "later-specs-only"}
    for part in ("requests", "messages"):  # a later round names what the shards hold by token
        assert rounds["later"][part]["bytes"] < rounds["later-specs-only"][part]["bytes"]
        assert rounds["later-specs-only"][part]["bytes"] <= rounds["first"][part]["bytes"]
        assert all(len(rounds[name][part]["samples"]) == 2 for name in rounds)


def test_a_first_round_ships_every_spec_profile_and_template_and_a_later_one_none() -> None:
    made = round_shipping.shipments(dataclasses.replace(round_shipping.QUICK_SHAPE, pod_spec="typical"))
    assert all(item.spec is not None and item.profiles is not None and item.inputs.shape is None
               for item in made.first)  # the plan's profiles stand for the shape
    assert all(item.spec is None and item.profiles is None and item.inputs.shape is None
               for item in made.later)
    assert all(item is not None and item.parts is not None for item in made.first_inputs)
    assert all(item is not None and item.parts is None for item in made.later_inputs)
    assert [item.key for item in made.first] == [item.key for item in made.later]
    # Held only the specs: the pod shapes in the requests, the message inputs whole.
    assert all(item.spec is None and item.inputs.shape is not None for item in made.specs_only)
    assert all(dataclasses.replace(old, inputs=held.inputs) == held and old.inputs.profiles is None
               for old, held in zip(made.specs_only, made.later, strict=True))
    assert [None if i is None else i.inputs for i in made.first_inputs] == made.whole_inputs


def test_a_typical_pod_asks_what_a_minimal_one_does_and_no_two_spreads_share_one() -> None:
    minimal = placement_world.Shape(spreads=10)
    typical = dataclasses.replace(minimal, pod_spec="typical")
    for index in range(3):
        small, full = (pod_shape.shape_from_deployment(placement_world.template(index, s))
                       for s in (minimal, typical))
        assert full.requests == small.requests  # placement reads the same; only the bytes differ
        assert len(json.dumps(placement_world.template(index, typical))) > 1500
    assert placement_world.template(0, typical) != placement_world.template(1, typical)
    assert "pod_spec" not in minimal.describe() and typical.describe()["pod_spec"] == "typical"
    with pytest.raises(ValueError, match="pod_spec"):
        placement_world.Shape(spreads=1, pod_spec="huge")
