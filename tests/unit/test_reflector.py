"""The shared list-then-watch state machine (`federation.kube.reflector`), on a fake lister.

Why these tests: the agent's cache and the coordinator's hub watcher both rest on it, and its subtle
parts (resume from the last resourceVersion, bookmarks, relist only on 410 with vanished objects
reported as DELETED, backoff on errors and on watches that end at once, close() cutting a blocked
watch) only show as call sequences, which a real apiserver makes hard to provoke.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from agents.cache import store as cache
from federation.core import inventory
from federation.kube import reflector

Json = dict[str, Any]


class FakeResponse:
    """A list body or a watch stream; `block` makes the stream wait for `shutdown()` at its end."""

    def __init__(self, body: Json | None = None, events: list[Json] | None = None, *,
                 block: bool = False) -> None:
        self.data = json.dumps(body or {}).encode()
        self._events = events or []
        self._cut = threading.Event() if block else None
        self.released = False

    def stream(self, amt: Any = None, decode_content: bool = False) -> Any:
        text = b"".join(json.dumps(e).encode() + b"\n" for e in self._events)
        yield from (text[i:i + 7] for i in range(0, len(text), 7))  # chunks split lines anywhere
        if self._cut is not None:
            if not self._cut.wait(10):
                raise AssertionError("the blocked watch was never cut")
            raise ConnectionError("connection shut down")

    def shutdown(self) -> None:
        if self._cut is not None:
            self._cut.set()

    def release_conn(self) -> None:
        self.released = True


class ApiError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


class Script:
    """A lister answering from a list of responses (or exceptions); stops the reflector at the end."""

    def __init__(self, stop: threading.Event, script: list[FakeResponse | Exception]) -> None:
        self.stop = stop
        self.script = list(script)
        self.calls: list[tuple[str, Any]] = []
        self.queries: list[dict[str, Any]] = []

    def __call__(self, **query: Any) -> FakeResponse:
        if not self.script:
            self.stop.set()
            raise AssertionError("the reflector asked for more than the script has")
        self.queries.append(query)
        self.calls.append(("watch", query["resource_version"]) if query.get("watch")
                          else ("list", query.get("_continue")))
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        return item


def obj(name: str, version: str) -> Json:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": version}}


def listing(*items: Json, version: str, token: str | None = None) -> FakeResponse:
    meta = {"resourceVersion": version, **({"continue": token} if token else {})}
    return FakeResponse({"items": list(items), "metadata": meta})


def watching(*events: tuple[str, Json]) -> FakeResponse:
    return FakeResponse(events=[{"type": t, "object": o} for t, o in events])


def run(item: reflector.Reflector) -> None:
    thread = threading.Thread(target=item.run, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "the reflector did not stop"


@pytest.fixture
def backoffs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The failure counts the reflector backed off with (no real waiting)."""
    seen: list[int] = []

    def record(failures: int) -> float:
        seen.append(failures)
        return 0.0

    monkeypatch.setattr(reflector, "backoff", record)
    return seen


def test_resumes_from_last_version_and_relists_only_on_gone(backoffs: list[int]) -> None:
    stop = threading.Event()
    lister = Script(stop, [
        listing(obj("a", "1"), version="1", token="t"),
        listing(obj("b", "1"), version="1"),
        watching(("ADDED", obj("c", "2")), ("BOOKMARK", {"metadata": {"resourceVersion": "3"}})),
        watching(("ERROR", {"code": 410, "message": "too old"})),
        listing(obj("a", "1"), obj("c", "5"), version="5"),  # a unchanged, b gone, c changed
        watching(("DELETED", obj("c", "6"))),
    ])
    seen: list[tuple[str, Json]] = []

    def emit(type_: reflector.EventType, item: Json) -> None:
        seen.append((type_, item))
        if type_ == "DELETED" and item["metadata"].get("resourceVersion") == "6":
            stop.set()  # the end of the script

    run(reflector.Reflector("pods", lister, emit=emit, stop=stop, label_selector="app=web"))

    assert lister.calls == [("list", None), ("list", "t"), ("watch", "1"), ("watch", "3"), ("list", None),
                            ("watch", "5")]
    assert all(q["label_selector"] == "app=web" and q["field_selector"] is None for q in lister.queries)
    assert all(q["allow_watch_bookmarks"] for q in lister.queries if q.get("watch"))
    assert [(t, (o.get("metadata") or {}).get("name")) for t, o in seen] == [
        ("ADDED", "a"), ("ADDED", "b"), ("SYNCED", None), ("ADDED", "c"),
        ("MODIFIED", "c"), ("DELETED", "b"), ("DELETED", "c"),
    ]
    assert seen[5][1] == {"metadata": {"name": "b", "namespace": "ns"}}  # vanished: a stub
    assert backoffs == []


def test_vanished_cluster_scoped_object_has_no_namespace(backoffs: list[int]) -> None:
    stop = threading.Event()
    node = {"metadata": {"name": "n1", "resourceVersion": "1"}}
    lister = Script(stop, [listing(node, version="1"), watching(("ERROR", {"code": 410})),
                           listing(version="2")])
    seen: list[tuple[str, Json]] = []
    run(reflector.Reflector("nodes", lister, emit=lambda t, o: seen.append((t, o)), stop=stop))

    assert seen == [("ADDED", node), ("SYNCED", {}), ("DELETED", {"metadata": {"name": "n1"}})]


def test_errors_back_off_and_a_410_status_relists_at_once(backoffs: list[int]) -> None:
    stop = threading.Event()
    lister = Script(stop, [
        listing(version="1"),
        ApiError(500),  # apiserver down: back off, watch again from the same version
        watching(("ERROR", {"code": 500, "message": "internal"})),
        ApiError(410),  # the version expired: list again, no waiting
        listing(obj("a", "2"), version="2"),
        watching(("MODIFIED", obj("a", "3"))),  # a working stream resets the failure count
        watching(),  # ends at once without a word: a failure too
    ])
    seen: list[str] = []
    run(reflector.Reflector("pods", lister, emit=lambda t, o: seen.append(t), stop=stop))

    assert lister.calls == [("list", None), ("watch", "1"), ("watch", "1"), ("watch", "1"), ("list", None),
                            ("watch", "2"), ("watch", "3")]
    assert backoffs == [1, 2, 1]
    assert seen == ["SYNCED", "ADDED", "MODIFIED"]


def test_watches_that_end_at_once_back_off_more_each_time(backoffs: list[int]) -> None:
    stop = threading.Event()
    lister = Script(stop, [listing(version="1"), watching(), watching(), watching()])
    run(reflector.Reflector("pods", lister, emit=lambda t, o: None, stop=stop))

    assert backoffs == [1, 2, 3]


def test_a_relist_that_fails_part_way_is_done_again(backoffs: list[int]) -> None:
    stop = threading.Event()
    lister = Script(stop, [
        listing(obj("a", "1"), obj("b", "1"), version="1"),
        watching(("ERROR", {"code": 410})),
        listing(obj("a", "1"), version="2"),  # emitting b's DELETED fails after the last page
        listing(obj("a", "1"), version="3"),
        watching(("ADDED", obj("c", "4"))),
    ])
    seen: list[tuple[str, str]] = []
    failed: list[bool] = []

    def emit(type_: reflector.EventType, item: Json) -> None:
        if type_ == "DELETED" and not failed:
            failed.append(True)
            raise RuntimeError("consumer hiccup")
        seen.append((type_, (item.get("metadata") or {}).get("name", "")))

    run(reflector.Reflector("pods", lister, emit=emit, stop=stop))

    assert lister.calls == [("list", None), ("watch", "1"), ("list", None), ("list", None), ("watch", "3")]
    assert seen == [("ADDED", "a"), ("ADDED", "b"), ("SYNCED", ""), ("DELETED", "b"), ("ADDED", "c")]
    assert backoffs == [1]


@pytest.mark.parametrize("early", [False, True])
def test_close_cuts_a_blocked_watch(backoffs: list[int], early: bool) -> None:
    stop = threading.Event()
    blocked = FakeResponse(block=True)
    asked = threading.Event()
    proceed = threading.Event()

    def lister(**query: Any) -> FakeResponse:
        if not query.get("watch"):
            return listing(version="1")
        asked.set()
        if early:  # close() runs before the watch's response exists: the reflector must notice
            proceed.wait(5)
        return blocked

    item = reflector.Reflector("pods", lister, emit=lambda t, o: None, stop=stop)
    thread = threading.Thread(target=item.run, daemon=True)
    thread.start()
    assert asked.wait(5)
    assert item.synced.is_set()
    stop.set()
    item.close()
    proceed.set()
    thread.join(5)
    assert not thread.is_alive(), "close() did not stop the watch"
    assert blocked.released
    assert backoffs == []


@pytest.mark.parametrize(
    ("text", "compact"),
    [("0", 0), ("7", 7), ("123456", 123456), ("9" * 19, int("9" * 19)),
     ("9" * 20, "9" * 20), ("0123", "0123"), ("-1", "-1"), ("+1", "+1"), (" 1", " 1"), ("1_000", "1_000"),
     ("\u0661\u0662", "\u0661\u0662"), ("", ""), ("abc", "abc"), (None, "None")],
)
def test_compact_version_keeps_plain_decimals_as_ints(text: str | None, compact: int | str) -> None:
    assert reflector.compact_version(text) == compact
    assert type(reflector.compact_version(text)) is type(compact)
    assert str(reflector.compact_version(text)) == str(text)  # the text comes back unchanged


def test_compacted_versions_differ_exactly_when_their_texts_do() -> None:
    texts = ["0", "00", "1", "01", "10", "1.0", "\u0661", "9" * 19, "9" * 20, "None", ""]
    for first in texts:
        for second in texts:
            same = reflector.compact_version(first) == reflector.compact_version(second)
            assert same == (first == second), (first, second)


def test_keyed_emit_receives_the_key_string_the_reflector_keeps(backoffs: list[int]) -> None:
    stop = threading.Event()
    lister = Script(stop, [
        listing(obj("a", "1"), obj("b", "1"), version="1"),
        watching(("MODIFIED", obj("a", "2")), ("ADDED", obj("c", "3")), ("ERROR", {"code": 410})),
        listing(obj("a", "2"), obj("c", "3"), version="4"),
    ])
    seen: list[tuple[str, str]] = []
    keys: dict[str, str] = {}

    def emit(type_: reflector.EventType, object_key: str, obj: Json) -> None:
        seen.append((type_, object_key))
        if type_ in ("ADDED", "DELETED"):
            keys[object_key] = object_key

    item = reflector.Reflector("pods", lister, emit_keyed=emit, stop=stop)
    run(item)

    assert seen == [("ADDED", "ns/a"), ("ADDED", "ns/b"), ("SYNCED", ""), ("MODIFIED", "ns/a"),
                    ("ADDED", "ns/c"), ("DELETED", "ns/b")]
    assert item._known == {"ns/a": 2, "ns/c": 3}  # versions as ints
    assert all(known is keys[known] for known in item._known)  # one string, shared with the consumer


def test_a_reflector_takes_exactly_one_emit() -> None:
    stop = threading.Event()
    with pytest.raises(TypeError):
        reflector.Reflector("pods", Script(stop, []), stop=stop)
    with pytest.raises(TypeError):
        reflector.Reflector("pods", Script(stop, []), emit=lambda t, o: None,
                            emit_keyed=lambda t, k, o: None, stop=stop)


def test_backoff_is_capped_exponential_and_jittered() -> None:
    for failures in range(1, 40):
        ceiling = min(reflector.BACKOFF_MAX, reflector.BACKOFF_BASE * 2.0 ** (failures - 1))
        for _ in range(20):
            assert ceiling / 2 <= reflector.backoff(failures) <= ceiling


class FakeCoreApi:
    """Member-cluster listers for the agent's cache: scripted nodes; no pods or Deployments."""

    def __init__(self, stop: threading.Event, nodes: list[FakeResponse | Exception]) -> None:
        self._nodes = Script(stop, nodes)
        self.watches: list[FakeResponse] = []

    def _quiet(self, **query: Any) -> FakeResponse:
        if not query.get("watch"):
            return listing(version="1")
        response = FakeResponse(block=True)
        self.watches.append(response)
        return response

    def list_node(self, **query: Any) -> FakeResponse:
        return self._nodes(**query)

    list_pod_for_all_namespaces = _quiet
    list_deployment_for_all_namespaces = _quiet
    list_replica_set_for_all_namespaces = _quiet
    list_stateful_set_for_all_namespaces = _quiet


def test_agent_cache_drops_what_a_relist_no_longer_lists() -> None:
    def node(name: str, version: str) -> Json:
        return {"metadata": {"name": name, "resourceVersion": version},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}}

    unused = threading.Event()
    hold = FakeResponse(block=True)
    api = FakeCoreApi(unused, [listing(node("n1", "1"), node("n2", "1"), version="1"),
                               watching(("ERROR", {"code": 410})),
                               listing(node("n1", "1"), version="2"), hold])
    feed = cache.Cache(api, api, watch_seconds=60)
    feed.start()
    try:
        assert feed.wait_synced(5)
        version = feed.version(cache.NODES)
        while [n.name for n in feed.nodes()] != ["n1"]:
            changed = feed.wait_for_change(version, timeout=5, kinds=(cache.NODES,))
            assert changed != version, f"the cache never dropped n2: {feed.nodes()}"
            version = changed
        assert feed.nodes()[0].ready
    finally:
        feed.stop()
    assert hold.released and all(w.released for w in api.watches)


class FakeBoundPodsApi(FakeCoreApi):
    """Member-cluster listers: scripted bound pods (the cache's field-selected list); nothing else."""

    def __init__(self, stop: threading.Event, pods: list[FakeResponse | Exception]) -> None:
        super().__init__(stop, [])
        self._pods = Script(stop, pods)

    def list_node(self, **query: Any) -> FakeResponse:
        return self._quiet(**query)

    def list_pod_for_all_namespaces(self, **query: Any) -> FakeResponse:
        if query.get("field_selector"):
            return self._pods(**query)
        return self._quiet(**query)


def bound_pod(name: str, version: str, *, uid: str, cpu: str, phase: str = "Running") -> Json:
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": version},
            "spec": {"nodeName": "n1",
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": phase}}


class Gated(FakeResponse):
    """A watch stream that starts only once `go` is set."""

    def __init__(self, go: threading.Event, *events: tuple[str, Json]) -> None:
        super().__init__(events=[{"type": t, "object": o} for t, o in events])
        self.go = go

    def stream(self, amt: Any = None, decode_content: bool = False) -> Any:
        assert self.go.wait(10), "the test never let the watch go on"
        yield from super().stream(amt, decode_content)


def test_agent_cache_keeps_one_usage_per_pod_recomputed_for_a_new_pod_of_the_same_name() -> None:
    uid = "6f1c2a9e-0b7d-4c1e-9a3f-2d5e8b7c6a10"
    compact = int(uid.replace("-", ""), 16)
    go, unused = threading.Event(), threading.Event()
    api = FakeBoundPodsApi(unused, [
        listing(bound_pod("a", "1", uid=uid, cpu="1"), bound_pod("b", "1", uid="not-a-uuid", cpu="1"),
                version="1"),
        Gated(go, ("MODIFIED", bound_pod("a", "2", uid=uid, cpu="1", phase="Pending")),  # status only
              ("MODIFIED", bound_pod("b", "3", uid="another", cpu="2"))),  # replaced under its name
        FakeResponse(block=True)])
    feed = cache.Cache(api, api, watch_seconds=60)
    feed.start()
    try:
        assert feed.wait_synced(5)
        first = {usage.uid: usage for usage in feed.usage()}
        version = feed.version(cache.USAGE)
        go.set()
        while "another" not in {usage.uid for usage in feed.usage()}:
            changed = feed.wait_for_change(version, timeout=5, kinds=(cache.USAGE,))
            assert changed != version, f"the cache never saw b replaced: {feed.usage()}"
            version = changed
        usage = {item.uid: item for item in feed.usage()}
        stores = feed._stores[cache.USAGE].items
        known = next(r for r in feed._reflectors if r.kind == cache.USAGE)._known
        shared = all(any(k is s for s in stores) for k in known)
    finally:
        feed.stop()
    assert set(first) == {compact, "not-a-uuid"}
    assert set(usage) == {compact, "another"}
    assert usage[compact] is first[compact]  # a status change: the same view, nothing recomputed
    assert str(usage["another"].requests["cpu"]) == "2"
    assert all(isinstance(u, inventory.PodUsage) and u.node_name == "n1" for u in usage.values())
    assert shared  # the store and the reflector hold one key string per pod
