"""`spec.topologySpread` and `subsets[].minReplicas`: skew across cluster domains and floors.

Why a module of its own: the spread's kind (`spread.py`) was already large, and these two fields
carry their own rules — KEP-895's field names lifted from nodes to clusters (`topologyKey` is any
MemberCluster label, or `fedspread.io/cluster` for one domain per cluster), and floors that must
agree with the caps. `spread.py` imports the models and calls `cross_field_problems` here, so every
problem is still reported with its own field path (`federation.api.problems`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

import pydantic

from federation.api import common

_PERCENT = re.compile(r"^([0-9]{1,3})%$")

WhenUnsatisfiable = Literal["DoNotSchedule", "ScheduleAnyway"]


class TopologySpreadConstraint(common.SpecModel):
    """How unequal the spread's replicas may be across the domains of one MemberCluster label."""

    topology_key: str = pydantic.Field(
        min_length=1,
        max_length=316,
        description=(
            "A MemberCluster label; each of its values is a domain. fedspread.io/cluster makes each "
            "cluster its own domain. A cluster without the label is in no domain: under DoNotSchedule "
            "it takes no replicas of this spread."
        ),
    )
    max_skew: int = pydantic.Field(
        ge=1,
        le=2**31 - 1,
        description=(
            "One more replica goes to domain d only when count(d) + 1 - globalMinimum <= maxSkew "
            "(the global minimum: the smallest count among eligible domains)."
        ),
    )
    when_unsatisfiable: WhenUnsatisfiable = pydantic.Field(
        default="DoNotSchedule",
        description=(
            "DoNotSchedule: a replica no domain admits is not placed (reported unplaced); "
            "ScheduleAnyway: prefer the place that leaves the smallest skew."
        ),
    )
    min_domains: int | None = pydantic.Field(
        default=None,
        ge=1,
        le=2**31 - 1,
        description=(
            "With fewer eligible domains than this, the global minimum is 0 (each domain holds at "
            "most maxSkew). Only with DoNotSchedule."
        ),
    )


def check_min_replicas(value: Any) -> Any:
    """A floor: a non-negative integer or a percentage of the total like '20%'."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("minReplicas must be a non-negative integer or a percentage like '20%'")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"minReplicas must not be negative, got {value}")
        return value
    if isinstance(value, str):
        match = _PERCENT.match(value.strip())
        if not match:
            raise ValueError(f"minReplicas {value!r} is neither an integer nor a percentage like '20%'")
        if int(match.group(1)) > 100:
            raise ValueError(f"minReplicas percentage must be between 0% and 100%, got {value}")
        return value.strip()
    raise ValueError("minReplicas must be a non-negative integer or a percentage like '20%'")


def floor_percent(min_replicas: int | str | None) -> int | None:
    """The percentage of a `"N%"` floor, or None for an integer or absent floor."""
    if isinstance(min_replicas, str):
        match = _PERCENT.match(min_replicas)
        if match:
            return int(match.group(1))
    return None


def _cap_percent(max_replicas: int | str | None) -> int | None:
    if isinstance(max_replicas, str):
        match = _PERCENT.match(max_replicas)
        if match:
            return int(match.group(1))
    return None


def _kind(value: int | str) -> str:
    return "percentage" if floor_percent(value) is not None else "integer"


def _article(kind: str) -> str:
    return f"an {kind}" if kind == "integer" else f"a {kind}"


def cross_field_problems(
    floors_and_caps: Sequence[tuple[int | str | None, int | str | None]],
    constraints: Sequence[TopologySpreadConstraint],
) -> list[tuple[str, str]]:
    """The rules spanning fields: (path relative to the spec, message) pairs.

    `floors_and_caps` are each subset's (minReplicas, maxReplicas) in spec order."""
    problems: list[tuple[str, str]] = []
    first_kind: tuple[int, str] | None = None
    percent_total = 0
    for index, (floor, cap) in enumerate(floors_and_caps):
        if floor is None:
            continue
        here = f"subsets[{index}].minReplicas"
        kind = _kind(floor)
        if first_kind is None:
            first_kind = (index, kind)
        elif first_kind[1] != kind:
            problems.append((here, (
                f"mixes floor kinds: subsets[{first_kind[0]}] has {_article(first_kind[1])} floor, "
                f"this one {_article(kind)}; use one kind for all floors")))
        pct = floor_percent(floor)
        if pct is not None:
            percent_total += pct
        cap_pct = _cap_percent(cap)
        integers_above = isinstance(floor, int) and isinstance(cap, int) and floor > cap
        percentages_above = pct is not None and cap_pct is not None and pct > cap_pct
        if integers_above or percentages_above:
            problems.append((here, f"floor {floor} is above the subset's cap maxReplicas {cap}"))
    if percent_total > 100:
        problems.append(
            ("subsets", f"percentage minReplicas sum to {percent_total}%, at most 100% is allowed"))
    for index, constraint in enumerate(constraints):
        if constraint.min_domains is not None and constraint.when_unsatisfiable != "DoNotSchedule":
            problems.append((f"topologySpread[{index}].minDomains",
                             "minDomains applies only with whenUnsatisfiable: DoNotSchedule"))
    return problems
