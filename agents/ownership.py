"""Which member Deployments this agent may touch: those carrying its federation and the spread's uid.

Why a rule of its own: a member cluster is shared. A user's own Deployment, or one another
federation's agent manages, may have the very name a spread targets; an agent that adopted it
would rewrite someone else's workload, and an agent that pruned "every Deployment with a spread
annotation" after talking to an empty or foreign coordinator would delete them. So a Deployment
the agent writes carries two marks: the federation identity (label `fedspread.io/federation`,
the coordinator's `--federation-id`, learnt from Welcome) and the hub spread's `metadata.uid`
(annotation `fedspread.io/spread-uid`, sent in each assignment). The agent then

- scales or updates only a Deployment whose marks equal the assignment's (`claim`); any other
  Deployment of the target's name is a `CONFLICT`, left untouched and reported to the coordinator;
- adopts a Deployment made by an earlier agent version (no marks at all, but the spread-key
  annotation of this very spread and the agent's desired-hash annotation, which only the agent
  writes) — the upgrade path; it is then stamped with both marks;
- prunes (`prunable`) only Deployments marked with the federation whose coordinator has completed
  a full resync on the current stream (`FederationState`), and whose (spread uid, namespace, name)
  no assignment of that federation names: a foreign or fresh coordinator of another federation
  deletes nothing; one of the same federation that has listed its hub means what it says;
- deletes or releases on an explicit removal only Deployments marked with the federation of the
  stream the removal came on.

Pure functions of labels and annotations, plus one small thread-safe holder shared by the link
(which learns the federation and the end of a resync) and the workload sync (which acts on them).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Collection, Mapping

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
        if (annotations.get(names.SPREAD_KEY_ANNOTATION) == value.spread
                and names.DESIRED_HASH_ANNOTATION in annotations
                and labels.get(names.SPREAD_LABEL) == value.name):
            return Claim(ADOPT, "made by an earlier fedspread agent for this spread")
        return Claim(CONFLICT, f"Deployment {where} exists and was not created by fedspread")
    if federation != value.federation:
        return Claim(CONFLICT, f"Deployment {where} belongs to federation {federation!r}, "
                               f"not {value.federation!r}")
    if uid != value.spread_uid:
        return Claim(CONFLICT, f"Deployment {where} belongs to another spread or an earlier spread of "
                               f"this name (uid {uid!r}); it is pruned after the next full resync")
    return Claim(OWNED)


def owns(*, federation: str, uid: str | None, value: assignment.Assignment) -> bool:
    """True when a Deployment's marks (`federation` label, `uid` annotation) are `value`'s."""
    return identified(value) and federation == value.federation and uid == value.spread_uid


def prunable(*, labels: Mapping[str, str], annotations: Mapping[str, str], where: tuple[str, str],
             federation: str, keep: Collection[tuple[str, str, str]]) -> bool:
    """True when a Deployment may be deleted after `federation`'s full resync: it carries that
    federation and a spread uid, and no assignment names (that uid, its namespace, its name)."""
    uid = annotations.get(names.SPREAD_UID_ANNOTATION)
    if not federation or labels.get(names.FEDERATION_LABEL) != federation or not uid:
        return False
    return (uid, *where) not in keep


class FederationState:
    """The federation of the current coordinator stream, and whether its full resync is complete.

    Written by the link (Welcome, ResyncComplete), read by the workload sync. Every Welcome starts
    again without a complete resync: until its ResyncComplete, nothing is pruned.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current = ""
        self._resynced = False

    def welcomed(self, federation: str) -> None:
        """A new stream was welcomed by a coordinator of `federation` (empty: an older coordinator)."""
        with self._lock:
            before, self._current, self._resynced = self._current, federation, False
        if before and before != federation:
            LOG.warning("coordinator serves another federation than before previous=%s current=%s; "
                        "Deployments of %s are neither changed nor deleted", before, federation or "''",
                        before)
        if not federation:
            LOG.warning("coordinator sent no federation identity; member Deployments are not written")

    def resync_complete(self) -> None:
        """The current stream's coordinator has sent every assignment (Notice ResyncComplete)."""
        with self._lock:
            self._resynced = True

    @property
    def current(self) -> str:
        """The federation of the current (or last) stream; empty before any Welcome."""
        with self._lock:
            return self._current

    def prunable(self) -> str:
        """The federation whose Deployments may be pruned now; empty when none may be."""
        with self._lock:
            return self._current if self._resynced else ""
