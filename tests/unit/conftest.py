"""Unit-test guard: unit tests never start Ray (issue 5) — placement logic runs on `LocalBackend`."""

from __future__ import annotations

from typing import Any, NoReturn

import hypothesis
import pytest

# No per-example deadline: it is a timed assertion, and timing is measured in bench/, never in
# tests (a loaded CI machine made a correct property test fail with DeadlineExceeded).
hypothesis.settings.register_profile("fedspread", deadline=None)
hypothesis.settings.load_profile("fedspread")

RAY_FORBIDDEN = "unit tests must not start Ray; use LocalBackend"


@pytest.fixture(autouse=True)
def _forbid_ray_init(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replace `ray.init` with a function that raises, for every unit test.

    `ray.is_initialized` answers False too: when the integration tests' session Ray is still up
    (one pytest run collects both), code that would reuse it must still hit the guard.
    """
    try:
        import ray
    except ImportError:  # no Ray installed: nothing can start it
        return

    def forbidden(*args: Any, **kwargs: Any) -> NoReturn:
        raise RuntimeError(RAY_FORBIDDEN)

    monkeypatch.setattr(ray, "init", forbidden)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
