"""The pure rules of fedspread's Event recorder: what an Event is, when it repeats, when it may go out.

Why apart from the recorder (`federation.kube.events`): these are the decisions worth testing
one by one — which occurrences are "the same Event" (dedup key), whether an occurrence creates a
new Event object or bumps the `series` of the last one (as client-go's events.k8s.io recorder does),
and whether a token bucket lets it out now — and each is a function of its inputs and a clock
reading, with no Kubernetes client and no thread. The recorder only feeds them and calls the API.

The body is the events.k8s.io/v1 shape as a plain mapping, times written as MicroTime
(`2006-01-02T15:04:05.000000Z`) by hand: the Python client's own serialisation drops the fraction
of a whole second, which the apiserver then refuses.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
from typing import Any, Final, Literal

EventType = Literal["Normal", "Warning"]
NORMAL: Final = "Normal"
WARNING: Final = "Warning"

MAX_NOTE_BYTES = 1024
"""The apiserver refuses a longer `note` (events.k8s.io/v1 validation)."""
MAX_FIELD_CHARS = 128
"""`reason`, `action` and `reportingInstance` are refused beyond this many characters."""
SERIES_WINDOW = datetime.timedelta(minutes=6)
"""An occurrence within this long of the last one of the same Event extends its series (client-go's
value); a later one starts a new Event object."""


@dataclasses.dataclass(frozen=True)
class ObjectRef:
    """The object an Event is about (`regarding`); `uid` lets `kubectl describe` find it."""

    api_version: str
    kind: str
    name: str
    namespace: str = ""
    uid: str = ""

    def as_json(self) -> dict[str, str]:
        """The ObjectReference as the API writes it (empty fields left out)."""
        body = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name,
                "namespace": self.namespace, "uid": self.uid}
        return {k: v for k, v in body.items() if v}


@dataclasses.dataclass(frozen=True)
class Occurrence:
    """One call of `record`: what happened to which object, as given by the caller."""

    regarding: ObjectRef
    reason: str
    note: str
    type: EventType
    action: str


DedupKey = tuple[str, str, str, str, str, str, str, str, str]


def truncate_note(note: str) -> str:
    """`note` cut to MAX_NOTE_BYTES of UTF-8 (on a character boundary, with an ellipsis)."""
    raw = note.encode()
    if len(raw) <= MAX_NOTE_BYTES:
        return note
    return raw[:MAX_NOTE_BYTES - 3].decode(errors="ignore") + "..."


def clean(occurrence: Occurrence) -> Occurrence:
    """The occurrence with fields the apiserver would refuse cut to their limits."""
    return dataclasses.replace(
        occurrence, reason=occurrence.reason[:MAX_FIELD_CHARS] or "Unknown",
        action=occurrence.action[:MAX_FIELD_CHARS] or "Unknown", note=truncate_note(occurrence.note))


def dedup_key(occurrence: Occurrence) -> DedupKey:
    """Occurrences with equal keys are one Event: the same object (its uid too: a new object of
    the same name is another), reason, note, type and action."""
    ref = occurrence.regarding
    return (ref.api_version, ref.kind, ref.namespace, ref.name, ref.uid, occurrence.reason,
            occurrence.type, occurrence.action, occurrence.note)


def object_key(occurrence: Occurrence) -> tuple[str, str, str, str]:
    """The object the per-object rate limit counts against."""
    ref = occurrence.regarding
    return ref.kind, ref.namespace, ref.name, ref.uid


def event_name(occurrence: Occurrence, *, first_seen: datetime.datetime) -> str:
    """`<object name>.<16 hex digits>`: unique per Event series, readable in `kubectl get events`."""
    digest = hashlib.sha256(repr((dedup_key(occurrence), first_seen.isoformat())).encode()).hexdigest()
    prefix = occurrence.regarding.name[:253 - 17].rstrip(".")
    return f"{prefix}.{digest[:16]}"


# --- series ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class Series:
    """What the recorder remembers of an Event object it created (mutable: count grows)."""

    occurrence: Occurrence
    name: str
    namespace: str
    first: datetime.datetime
    last: datetime.datetime
    count: int = 1
    written: int = 1
    """The count the apiserver has; below `count` while an update waits for a token."""


CREATE, UPDATE = "create", "update"


def next_step(series: Series | None, *, now: datetime.datetime,
              window: datetime.timedelta = SERIES_WINDOW) -> str:
    """CREATE a new Event object, or UPDATE the series of `series` (the last one of this key)."""
    if series is None or now - series.last > window:
        return CREATE
    return UPDATE


def observe(series: Series, *, now: datetime.datetime) -> None:
    """One more occurrence of the Event `series` (not yet written)."""
    series.count += 1
    series.last = max(series.last, now)


# --- rate limiting --------------------------------------------------------------------------------


@dataclasses.dataclass
class TokenBucket:
    """`burst` tokens, refilled at `rate` per second; `take` spends one if there is one."""

    rate: float
    burst: float
    tokens: float = -1.0
    stamp: float | None = None

    def __post_init__(self) -> None:
        if self.rate < 0 or self.burst < 1:
            raise ValueError(f"a token bucket needs rate >= 0 and burst >= 1, not {self.rate}/{self.burst}")
        if self.tokens < 0:
            self.tokens = self.burst

    def refill(self, now: float) -> None:
        """Add the tokens earned since the last look (`now` is a monotonic reading)."""
        if self.stamp is not None and now > self.stamp:
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now if self.stamp is None else max(self.stamp, now)

    def full(self, now: float) -> bool:
        """Refilled to the brim: nothing would change if it were forgotten."""
        self.refill(now)
        return self.tokens >= self.burst

    def take(self, now: float) -> bool:
        """Spend a token if there is one."""
        self.refill(now)
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


def admit(per_object: TokenBucket, overall: TokenBucket, *, now: float) -> bool:
    """Both buckets have a token (then both are spent); neither is spent when one is empty."""
    per_object.refill(now)
    overall.refill(now)
    if per_object.tokens < 1 or overall.tokens < 1:
        return False
    per_object.tokens -= 1
    overall.tokens -= 1
    return True


# --- bodies ---------------------------------------------------------------------------------------


def micro_time(when: datetime.datetime) -> str:
    """A MicroTime as the apiserver parses it (always six fraction digits, UTC)."""
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_body(occurrence: Occurrence, *, name: str, namespace: str, now: datetime.datetime,
               controller: str, instance: str) -> dict[str, Any]:
    """A new events.k8s.io/v1 Event for `occurrence`."""
    return {
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "eventTime": micro_time(now),
        "reportingController": controller, "reportingInstance": instance[:MAX_FIELD_CHARS],
        "action": occurrence.action, "reason": occurrence.reason, "note": occurrence.note,
        "type": occurrence.type, "regarding": occurrence.regarding.as_json(),
    }


def series_patch(series: Series) -> dict[str, Any]:
    """The merge patch that brings an Event's series up to `series` (count >= 2)."""
    return {"series": {"count": series.count, "lastObservedTime": micro_time(series.last)}}


def event_namespace(ref: ObjectRef) -> str:
    """Where the Event lives: its object's namespace, `default` for a cluster-scoped object."""
    return ref.namespace or "default"
