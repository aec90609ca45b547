"""Which member Deployments this agent may touch: those carrying its federation and the spread's uid.

Why a rule of its own: a member cluster is shared. A user's own Deployment, or one another
federation's agent manages, may have the very name a spread targets; an agent that adopted it
would rewrite someone else's workload. So a Deployment the agent writes carries two marks: the
federation identity (label `fedspread.io/federation`, the coordinator's `--federation-id`, learnt
from Welcome) and the hub spread's `metadata.uid` (annotation `fedspread.io/spread-uid`, sent in
each assignment). The agent then

- scales or updates only a Deployment whose marks equal the assignment's (`claim`); any other
  Deployment of the target's name is a `CONFLICT`, left untouched and reported to the coordinator;
- adopts a Deployment of its federation made for an earlier spread of the same key (another uid:
  the hub was restored, or the spread deleted while the coordinator was down and created again);
- adopts a Deployment it released for an earlier spread of the same key in its federation (the
  `released-from` mark a release leaves: the spread was deleted with `deletionPolicy: Orphan` and
  created again, `kubectl replace --force` or a GitOps replace); a released Deployment is
  otherwise nobody's to adopt: another spread, or another federation, meets it as a `CONFLICT`;
- adopts a Deployment made by an earlier agent version (no marks at all, but the spread-key
  annotation of this very spread and the agent's desired-hash annotation, which only the agent
  writes) — the upgrade path; it is then stamped with both marks;
- deletes or releases only on an explicit removal, and only Deployments marked with the
  federation of the stream the removal came on. Nothing is deleted because no assignment names
  it: an agent that reached an empty hub's coordinator, or a wrong one, must not delete (or
  un-manage) every workload of its cluster. `marked_spread` names what the agent's Hello lists, so
  that the coordinator can send the removals it has reasons for.

Pure functions of labels and annotations, plus one small thread-safe holder of the federation,
shared by the link (which learns it from Welcome) and the agent's wiring (which stamps removals).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Mapping

from federation.api import names
from federation.rpc import assignment

LOG = logging.getLogger(__name__)

OWNED, ADOPT, CONFLICT = "owned", "adopt", "conflict"


@dataclasses.dataclass(frozen=True)
class Claim:
    """What the agent may do with a live Deployment of an assignment's target name, and why not."""

    verdict: str
    reason: str = ""


def marks(value: assignment.Assignment) -> tuple[dict[str, str], dict[str, str]]:
    """The (labels, annotations) a Deployment of `value` carries to say whose it is."""
    return ({names.FEDERATION_LABEL: value.federation},
            {names.SPREAD_UID_ANNOTATION: value.spread_uid})


def identified(value: assignment.Assignment) -> bool:
    """True when the assignment says whose it is (a coordinator older than the agent does not)."""
    return bool(value.federation and value.spread_uid)


def claim(*, labels: Mapping[str, str] | None, annotations: Mapping[str, str] | None,
          value: assignment.Assignment, where: str) -> Claim:
    """Whether the live Deployment `where` (its labels and annotations) belongs to `value`."""
    labels, annotations = labels or {}, annotations or {}
    if not identified(value):
        return Claim(CONFLICT, "the coordinator sent no federation identity or spread uid "
                               "(it is older than the agent); the member Deployment is left alone")
    federation = labels.get(names.FEDERATION_LABEL)
    uid = annotations.get(names.SPREAD_UID_ANNOTATION)
    if federation is None and uid is None:
        released = annotations.get(names.RELEASED_FROM_ANNOTATION)
        if released is not None:
            if released == names.released_from(value.federation, value.spread):
                return Claim(ADOPT, f"released by an earlier spread {value.spread} of this federation; "
                                    f"re-stamped with uid {value.spread_uid!r}")
            return Claim(CONFLICT, f"Deployment {where} exists and was not created by fedspread for "
                                   f"this spread (released by {released!r}; only that spread of that "
                                   "federation adopts it)")
        if (annotations.get(names.SPREAD_KEY_ANNOTATION) == value.spread
                and names.DESIRED_HASH_ANNOTATION in annotations
                and labels.get(names.SPREAD_LABEL) == value.name):
            return Claim(ADOPT, "made by an earlier fedspread agent for this spread")
        return Claim(CONFLICT, f"Deployment {where} exists and was not created by fedspread")
    if federation != value.federation:
        return Claim(CONFLICT, f"Deployment {where} belongs to federation {federation!r}, "
                               f"not {value.federation!r}")
    if uid != value.spread_uid:
        # A spread key (namespace/name) is unique among a hub's live spreads: the spread this
        # Deployment was made for is gone. This is the hub-restore path (a restored hub gives its
        # spreads new uids) and that of a spread deleted while the coordinator was down and created
        # again: its Deployment was kept (nothing is deleted by absence) and is taken over.
        if uid and annotations.get(names.SPREAD_KEY_ANNOTATION) == value.spread:
            return Claim(ADOPT, f"made for an earlier spread {value.spread} (uid {uid!r}); "
                                f"re-stamped with uid {value.spread_uid!r}")
        return Claim(CONFLICT, f"Deployment {where} belongs to another spread "
                               f"({annotations.get(names.SPREAD_KEY_ANNOTATION)!r}, uid {uid!r})")
    return Claim(OWNED)


def owns(*, federation: str, uid: str | None, value: assignment.Assignment) -> bool:
    """True when a Deployment's marks (`federation` label, `uid` annotation) are `value`'s."""
    return identified(value) and federation == value.federation and uid == value.spread_uid


def marked_spread(*, federation_label: str, annotations: Mapping[str, str],
                  federation: str) -> tuple[str, str] | None:
    """(spread key, spread uid) of a Deployment marked as `federation`'s by this agent: the
    federation label, a spread uid and a spread key annotation; None for any other Deployment."""
    uid = annotations.get(names.SPREAD_UID_ANNOTATION)
    key = annotations.get(names.SPREAD_KEY_ANNOTATION)
    if not federation or federation_label != federation or not uid or not key:
        return None
    return key, uid


class FederationState:
    """The federation of the current coordinator stream, and the one the agent was started for.

    Written by the link (Welcome), read by the Hello (whose Deployments to list) and by the
    agent's wiring (which federation a removal acts on: the one of the stream it came on).
    """

    def __init__(self, expected: str = "") -> None:
        self._lock = threading.Lock()
        self._current = ""
        self.expected = expected
        """The agent's `--federation-id` ("": not configured): what it expects to be welcomed by."""

    def welcomed(self, federation: str) -> None:
        """A new stream was welcomed by a coordinator of `federation` (empty: an older coordinator)."""
        with self._lock:
            before, self._current = self._current, federation
        if before and before != federation:
            LOG.warning("coordinator serves another federation than before; Deployments of %s are "
                        "neither changed nor deleted", before,
                        extra={"previous": before, "current": federation or "''"})
        elif federation and self.expected and federation != self.expected and before != federation:
            LOG.warning("coordinator serves another federation than this agent's --federation-id; "
                        "Deployments marked %s are left alone, the coordinator's spreads are applied",
                        self.expected, extra={"expected": self.expected, "current": federation})
        if not federation:
            LOG.warning("coordinator sent no federation identity; member Deployments are not written")

    @property
    def current(self) -> str:
        """The federation of the current (or last) stream; empty before any Welcome."""
        with self._lock:
            return self._current

    @property
    def listed(self) -> str:
        """Whose marked Deployments a Hello lists: the last stream's federation, else the expected."""
        with self._lock:
            return self._current or self.expected
