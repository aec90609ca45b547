"""Unit-test guard: unit tests never start Ray (issue 5) — placement logic runs on `LocalBackend`."""

from __future__ import annotations

from typing import Any, NoReturn

import pytest

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
