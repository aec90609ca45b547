"""What a round's requests cost to ship to the SpreadShards (`bench.round_shipping`), at a small size.

The benchmark's figures back a design decision (docs/decisions.md, "the member views are sent
inside the requests"), so what it compares must be what it says: the round's requests as the Ray
backend ships them, and the same requests with only the member views replaced by numbers.
"""

from __future__ import annotations

import dataclasses

from bench import round_shipping


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
