"""`spec.rebalance` (issue 28): defaults, field-path validation, and maxSurge resolved against replicas."""

from __future__ import annotations

from typing import Any

import pytest

from federation.api import problems, rebalance, spread


def spread_with(rebalance_doc: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"targetRef": {"name": "web"}, "subsets": [{"name": "dc1", "clusters": ["dc1"]}]}
    if rebalance_doc is not None:
        spec["rebalance"] = rebalance_doc
    return {"apiVersion": "fedspread.io/v1alpha1", "kind": "FederatedSpread",
            "metadata": {"name": "web", "namespace": "shop"}, "spec": spec}


def test_absent_rebalance_is_never_with_surge_1_and_cooldown_300() -> None:
    parsed = problems.validate(spread.FederatedSpread, spread_with(None), what="spread")
    assert parsed.spec.rebalance == rebalance.Rebalance(policy="Never", max_surge=1, cooldown_seconds=300)
    assert "rebalance" not in parsed.spec.model_dump(by_alias=True, exclude_defaults=True)


def test_when_room_with_a_percentage_surge_parses() -> None:
    doc = spread_with({"policy": "WhenRoom", "maxSurge": " 25% ", "cooldownSeconds": 0})
    parsed = problems.validate(spread.FederatedSpread, doc, what="spread").spec.rebalance
    assert (parsed.policy, parsed.max_surge, parsed.cooldown_seconds) == ("WhenRoom", "25%", 0)


@pytest.mark.parametrize(("field", "value", "fragment"), [
    ("policy", "Always", "Input should be 'Never' or 'WhenRoom'"),
    ("maxSurge", 0, "maxSurge must be at least 1, got 0"),
    ("maxSurge", -2, "maxSurge must be at least 1, got -2"),
    ("maxSurge", "0%", "between 1% and 100%, got 0%"),
    ("maxSurge", "101%", "between 1% and 100%, got 101%"),
    ("maxSurge", "two", "neither an integer nor a percentage"),
    ("maxSurge", True, "positive integer or a percentage"),
    ("maxSurge", 1.5, "positive integer or a percentage"),
    ("cooldownSeconds", -1, "greater than or equal to 0"),
    ("cooldownSeconds", 2**31, "less than or equal to 2147483647"),
    ("unknown", 1, "unknown field"),
])
def test_each_invalid_field_is_reported_at_its_path(field: str, value: Any, fragment: str) -> None:
    with pytest.raises(problems.InvalidInput) as raised:
        problems.validate(spread.FederatedSpread, spread_with({field: value}), what="spread")
    found = [str(p) for p in raised.value.problems]
    assert len(found) == 1, found
    assert found[0].startswith(f"spec.rebalance.{field}: "), found
    assert fragment in found[0], found


def test_every_problem_of_rebalance_is_reported_at_once() -> None:
    doc = spread_with({"policy": "Sometimes", "maxSurge": "0%", "cooldownSeconds": -1})
    with pytest.raises(problems.InvalidInput) as raised:
        problems.validate(spread.FederatedSpread, doc, what="spread")
    assert sorted(p.path for p in raised.value.problems) == [
        "spec.rebalance.cooldownSeconds", "spec.rebalance.maxSurge", "spec.rebalance.policy"]


@pytest.mark.parametrize(("max_surge", "replicas", "surge"), [
    (1, 10, 1), (3, 2, 3), ("25%", 10, 3), ("25%", 8, 2), ("10%", 5, 1), ("1%", 0, 1), ("100%", 7, 7),
])
def test_surge_is_a_percentage_of_replicas_rounded_up_and_at_least_one(
        max_surge: int | str, replicas: int, surge: int) -> None:
    assert rebalance.Rebalance(max_surge=max_surge).surge(replicas) == surge


@pytest.mark.parametrize(("value", "total", "up", "down"), [
    (2, 9, 2, 2), ("25%", 9, 3, 2), ("50%", 4, 2, 2), ("0%", 4, 0, 0)])
def test_int_or_percent_rounds_as_a_deployment_does(value: int | str, total: int, up: int, down: int) -> None:
    assert rebalance.resolve_int_or_percent(value, total, round_up=True) == up
    assert rebalance.resolve_int_or_percent(value, total, round_up=False) == down
