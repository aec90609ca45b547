"""The Event recorder's pure rules: dedup keys, series decisions, token buckets, bodies."""

from __future__ import annotations

import datetime

import pytest

from federation.kube import event_series as es

T0 = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
POD = es.ObjectRef("v1", "Pod", "web-1", namespace="shop", uid="u-1")


def occurrence(note: str = "moved", *, reason: str = "Rescheduled", ref: es.ObjectRef = POD,
               type: es.EventType = es.NORMAL) -> es.Occurrence:
    return es.Occurrence(regarding=ref, reason=reason, note=note, type=type, action="Delete")


def test_same_object_reason_and_note_share_a_key_anything_else_does_not() -> None:
    key = es.dedup_key(occurrence())
    assert es.dedup_key(occurrence()) == key
    assert es.dedup_key(occurrence("other note")) != key
    assert es.dedup_key(occurrence(reason="Other")) != key
    assert es.dedup_key(occurrence(type=es.WARNING)) != key
    same_name = es.ObjectRef("v1", "Pod", "web-1", namespace="shop", uid="u-2")
    assert es.dedup_key(occurrence(ref=same_name)) != key, "a new object of the same name is another object"
    assert es.object_key(occurrence("a")) == es.object_key(occurrence("b", reason="Other"))


def test_an_occurrence_within_the_window_extends_the_series_a_later_one_starts_anew() -> None:
    assert es.next_step(None, now=T0) == es.CREATE
    series = es.Series(occurrence=occurrence(), name="web-1.x", namespace="shop", first=T0, last=T0)
    within = T0 + es.SERIES_WINDOW
    assert es.next_step(series, now=within) == es.UPDATE
    es.observe(series, now=within)
    assert (series.count, series.last, series.written) == (2, within, 1)
    assert es.next_step(series, now=within + es.SERIES_WINDOW + datetime.timedelta(seconds=1)) == es.CREATE
    es.observe(series, now=T0)  # a late reading never moves lastObservedTime back
    assert (series.count, series.last) == (3, within)
    assert es.series_patch(series) == {"series": {"count": 3,
                                                  "lastObservedTime": "2026-01-02T03:10:05.000000Z"}}


def test_token_bucket_spends_its_burst_then_refills_at_its_rate() -> None:
    bucket = es.TokenBucket(rate=0.5, burst=2)
    assert [bucket.take(0.0) for _ in range(3)] == [True, True, False]
    assert not bucket.take(1.0), "half a token after one second"
    assert bucket.take(2.0)
    assert not bucket.take(2.0)
    assert bucket.full(100.0) and bucket.tokens == 2, "never more than the burst"
    with pytest.raises(ValueError, match="burst >= 1"):
        es.TokenBucket(rate=1, burst=0)


def test_admit_spends_both_buckets_or_neither() -> None:
    per_object, overall = es.TokenBucket(rate=0, burst=1), es.TokenBucket(rate=0, burst=5)
    assert es.admit(per_object, overall, now=0.0)
    assert not es.admit(per_object, overall, now=0.0)
    assert overall.tokens == 4, "a write refused by the object's bucket costs the overall one nothing"
    other, empty = es.TokenBucket(rate=0, burst=3), es.TokenBucket(rate=0, burst=1, tokens=0)
    assert not es.admit(other, empty, now=0.0)
    assert other.tokens == 3


def test_the_body_is_an_events_k8s_io_v1_event_with_limits_applied() -> None:
    long = es.clean(occurrence("é" * 2000, reason="R" * 300))
    assert len(long.note.encode()) <= es.MAX_NOTE_BYTES and long.note.endswith("...")
    assert len(long.reason) == es.MAX_FIELD_CHARS
    name = es.event_name(occurrence(), first_seen=T0)
    assert name.startswith("web-1.") and len(name) == len("web-1.") + 16
    assert es.event_name(occurrence(), first_seen=T0 + datetime.timedelta(minutes=7)) != name
    body = es.event_body(occurrence(), name=name, namespace="shop", now=T0,
                         controller="fedspread.io/agent", instance="dc1")
    assert body == {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name, "namespace": "shop"},
        "eventTime": "2026-01-02T03:04:05.000000Z", "reportingController": "fedspread.io/agent",
        "reportingInstance": "dc1", "action": "Delete", "reason": "Rescheduled", "note": "moved",
        "type": "Normal",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "name": "web-1", "namespace": "shop", "uid": "u-1"},
    }
    assert es.event_namespace(es.ObjectRef("fedspread.io/v1alpha1", "MemberCluster", "dc1")) == "default"
