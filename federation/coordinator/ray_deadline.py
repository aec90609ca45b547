"""Joining a Ray cluster within a deadline: `ray.init` has none of its own.

Why a module of its own: `ray.init(address=...)` can retry for minutes against an address where no
Ray answers (`ray_join` says how long, and asks the address first), and the coordinator must not
hang at start. The join runs in a daemon thread that is abandoned past the deadline; the caller is
expected to exit. The Ray module is passed in, so this module imports no Ray (only `shards` may).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any


class RayJoinTimeout(Exception):
    """`ray.init` did not finish joining a Ray cluster within its deadline."""


def init_within(ray: Any, *, address: str, options: Mapping[str, Any], timeout: float) -> None:
    """`ray.init(address, **options)` within `timeout` seconds, its own errors re-raised."""
    outcome: list[BaseException | None] = []

    def join() -> None:
        try:
            ray.init(address=address, **options)
            outcome.append(None)
        except BaseException as error:  # handed to the caller's thread
            outcome.append(error)

    thread = threading.Thread(target=join, name="ray-join", daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome:
        raise RayJoinTimeout(f"joining Ray at {address} did not finish within {timeout:g} s")
    if outcome[0] is not None:
        raise outcome[0]
