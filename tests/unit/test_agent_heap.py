"""The agent hands freed heap back to the OS where glibc can, and nowhere else fails for it.

Why: `agents.cache.heap.release` runs after the cache's first lists and after every pool rebuild,
in every agent; on a C library without `malloc_trim` (musl, macOS) or when the call fails it must
be a no-op, never an error in the cache's or the reporter's thread.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import pytest

from agents.cache import heap
from agents.cache import store as cache


def test_release_trims_where_the_c_library_has_malloc_trim() -> None:
    has_trim = hasattr(ctypes.CDLL(None), "malloc_trim")
    assert heap.release() is has_trim
    assert (heap._malloc_trim() is not None) is has_trim


def test_release_is_a_no_op_without_malloc_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_malloc_trim", lambda: None)
    assert heap.release() is False


def test_a_failing_trim_is_not_the_callers_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(pad: int) -> int:
        raise OSError("no")

    monkeypatch.setattr(heap, "_malloc_trim", lambda: broken)
    assert heap.release() is False


class QuietApi:
    """Listers with nothing to list, whose watches block until cut."""

    def __init__(self) -> None:
        self.cut = threading.Event()

    class _Response:
        def __init__(self, cut: threading.Event, body: bytes = b"") -> None:
            self.data, self._cut = body, cut

        def stream(self, amt: Any = None, decode_content: bool = False) -> Any:
            self._cut.wait(10)
            raise ConnectionError("cut")
            yield b""

        def shutdown(self) -> None:
            self._cut.set()

        def release_conn(self) -> None:
            """Nothing to release."""

    def _list(self, **query: Any) -> Any:
        if query.get("watch"):
            return self._Response(self.cut)
        return self._Response(self.cut, b'{"items": [], "metadata": {"resourceVersion": "1"}}')

    list_node = list_pod_for_all_namespaces = list_deployment_for_all_namespaces = _list
    list_replica_set_for_all_namespaces = list_stateful_set_for_all_namespaces = _list
    list_job_for_all_namespaces = _list


def test_the_cache_trims_once_each_resource_is_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[bool] = []
    monkeypatch.setattr(heap, "release", lambda: trims.append(True) or True)
    api = QuietApi()
    feed = cache.Cache(api, api, batch_api=api, watch_seconds=60)
    feed.start()
    try:
        assert feed.wait_synced(5)
    finally:
        feed.stop()
    assert len(trims) == 7  # nodes, bound pods, spread pods, Deployments, ReplicaSets, StatefulSets, Jobs
