"""`spec.rebalance`: whether and how a spread fails back to its preferred subsets.

Why a module of its own: the spread's kind (`spread.py`) is already large, and these fields carry
their own rules. fedspread is stable by design — replicas that overflowed stay where they went —
so failback is opt-in (`policy: WhenRoom`; the default `Never` keeps today's behaviour), and a move
is bounded like a Deployment's rolling update: `maxSurge` extra pods at a time (an integer or a
percentage of `replicas`, rounded up as Kubernetes rounds a surge), no second move of the spread
sooner than `cooldownSeconds` after the last one. The rule itself is `federation.core.failback`;
`resolve_int_or_percent` is here so that the core's rollout rule resolves a Deployment's
`maxSurge` the same way.
"""

from __future__ import annotations

import datetime
import math
import re
from typing import Any, Literal

import pydantic

from federation.api import common

_PERCENT = re.compile(r"^([0-9]{1,3})%$")
_MAX_SECONDS = 2**31 - 1  # as spread.MAX_SECONDS (spread imports this module, not the reverse)

RebalancePolicy = Literal["Never", "WhenRoom"]


def check_max_surge(value: Any) -> Any:
    """A surge: a positive integer or a percentage from 1% to 100% like '25%'."""
    message = "maxSurge must be a positive integer or a percentage like '25%'"
    if isinstance(value, bool):
        raise ValueError(message)
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"maxSurge must be at least 1, got {value}: a move starts its new pods first")
        if value > 2**31 - 1:
            raise ValueError(f"maxSurge must be at most {2**31 - 1}, got {value}")
        return value
    if isinstance(value, str):
        match = _PERCENT.match(value.strip())
        if not match:
            raise ValueError(f"maxSurge {value!r} is neither an integer nor a percentage like '25%'")
        percent = int(match.group(1))
        if not 1 <= percent <= 100:
            raise ValueError(f"maxSurge percentage must be between 1% and 100%, got {value}")
        return f"{percent}%"
    raise ValueError(message)


def resolve_int_or_percent(value: int | str, total: int, *, round_up: bool) -> int:
    """An int-or-percent (Kubernetes' IntOrString) against `total`: an integer as given, a
    percentage of `total` rounded up or down (a Deployment rounds maxSurge up, maxUnavailable
    down)."""
    if isinstance(value, int):
        return value
    match = _PERCENT.match(value.strip())
    if not match:
        raise ValueError(f"{value!r} is neither an integer nor a percentage")
    scaled = int(match.group(1)) * total
    return math.ceil(scaled / 100) if round_up else scaled // 100


class Rebalance(common.SpecModel):
    """Failback: move replicas back to higher-priority subsets once they have room, surge first."""

    policy: RebalancePolicy = pydantic.Field(
        default="Never",
        description=(
            "Never (the default): replicas stay where they were placed, as before. WhenRoom: when "
            "the placement the spread would get from scratch puts more replicas in a higher-priority "
            "subset than it holds, move them back step by step: maxSurge new pods above the total "
            "there, then as many removed from the lowest-priority subsets once the new ones are Ready."
        ),
    )
    max_surge: int | str = pydantic.Field(
        default=1,
        description=(
            "How many extra pods one move step may run: a positive integer or a percentage of "
            "replicas like '25%' (rounded up, at least 1)."
        ),
    )
    cooldown_seconds: int = pydantic.Field(
        default=300,
        ge=0,
        le=_MAX_SECONDS,
        description="No move step of this spread starts sooner than this after the last one completed.",
    )

    @pydantic.field_validator("max_surge", mode="before")
    @classmethod
    def _valid_surge(cls, value: Any) -> Any:
        return check_max_surge(value)

    def surge(self, replicas: int) -> int:
        """`maxSurge` in pods for `replicas` in total: a percentage rounded up, never below 1."""
        return max(1, resolve_int_or_percent(self.max_surge, replicas, round_up=True))


class RebalanceMoveStatus(common.StatusModel):
    """Replicas a failback step moves from one (subset, cluster) to a higher-priority one."""

    from_subset: str = pydantic.Field(description="The subset the replicas leave.")
    from_cluster: str = pydantic.Field(description="The cluster the replicas leave.")
    to_subset: str = pydantic.Field(description="The higher-priority subset they go to.")
    to_cluster: str = pydantic.Field(description="The cluster they go to.")
    replicas: int = pydantic.Field(default=0, description="How many replicas move.")


class RebalanceReadyStatus(common.StatusModel):
    """Ready pods of one (subset, cluster) the step adds to, when it started."""

    subset: str = pydantic.Field(description="Subset name.")
    cluster: str = pydantic.Field(description="Member cluster name.")
    replicas: int = pydantic.Field(default=0, description="Its Ready pods when the step started.")


class RebalanceStepStatus(common.StatusModel):
    """The failback step in flight: its new pods run above the total until Ready."""

    started: datetime.datetime = pydantic.Field(description="When the step started its new pods.")
    moves: list[RebalanceMoveStatus] = pydantic.Field(default_factory=list, description="What it moves.")
    ready_before: list[RebalanceReadyStatus] = pydantic.Field(
        default_factory=list, description="Ready pods of each pair it adds to, when it started.")


class RebalancingStatus(common.StatusModel):
    """What the coordinator keeps of a spread's failback (a restarted coordinator resumes from it)."""

    step: RebalanceStepStatus | None = pydantic.Field(
        default=None, description="The step in flight, if any.")
    last_move: datetime.datetime | None = pydantic.Field(
        default=None, description="When the last step finished or stopped (the cooldown counts from it).")
    last_outcome: Literal["Finished", "Stopped"] | None = pydantic.Field(
        default=None, description=("How the last step ended: Finished (its new pods were Ready and the old "
                                   "ones went) or Stopped (its new pods were not Ready in time)."))
    on_demand: bool = pydantic.Field(
        default=False, description="A whole failback asked by `fedspread rebalance` is under way.")
    max_surge: int | None = pydantic.Field(
        default=None, description="The surge in pods that failback asked for (absent: spec.rebalance's).")
