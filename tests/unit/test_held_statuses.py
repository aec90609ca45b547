"""`HeldStatuses`: a status is skipped only while no watch event came since it was confirmed.

Why these cases: skipping a write the hub needed would leave a wrong status on the hub for up to
`REREAD_SECONDS`, so every order of write, echo and foreign edit must end in "unknown" unless the
last thing that happened was our confirmation.
"""

from __future__ import annotations

import datetime

from federation.coordinator.hub import held_statuses

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
OBJ = ("spread", "shop/web")


def confirmed(held: held_statuses.HeldStatuses, value: object) -> None:
    held.remember(OBJ, value, mark=held.mark(OBJ))


def test_nothing_is_held_until_a_write_confirms_it() -> None:
    held = held_statuses.HeldStatuses()
    assert not held.holds(OBJ, "v1")
    confirmed(held, "v1")
    assert held.holds(OBJ, "v1") and not held.holds(OBJ, "v2")
    assert not held.holds(("spread", "shop/other"), "v1")


def test_an_event_forgets_what_was_held() -> None:
    held = held_statuses.HeldStatuses()
    confirmed(held, "v1")
    held.seen(OBJ)
    assert not held.holds(OBJ, "v1")


def test_an_event_during_a_write_leaves_the_status_unknown() -> None:
    held = held_statuses.HeldStatuses()
    mark = held.mark(OBJ)
    held.seen(OBJ)  # someone else's edit, or our own echo, before we remember
    held.remember(OBJ, "v1", mark=mark)
    assert not held.holds(OBJ, "v1")
    confirmed(held, "v1")  # the next pass reads it and finds v1
    assert held.holds(OBJ, "v1")


def test_forgetting_an_object_and_the_reread_period() -> None:
    held = held_statuses.HeldStatuses(reread_seconds=60)
    held.start_pass(T0)
    confirmed(held, "v1")
    held.forget(OBJ)
    assert not held.holds(OBJ, "v1")
    confirmed(held, "v1")
    held.start_pass(T0 + datetime.timedelta(seconds=59))
    assert held.holds(OBJ, "v1")
    held.start_pass(T0 + datetime.timedelta(seconds=60))
    assert not held.holds(OBJ, "v1")


def test_values_compare_as_the_caller_says() -> None:
    held = held_statuses.HeldStatuses()
    confirmed(held, "V1")
    assert held.holds(OBJ, "v1", same=lambda a, b: str(a).lower() == str(b).lower())
