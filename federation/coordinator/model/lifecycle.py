"""Which spread may place its target Deployment, and how a spread's workloads leave a cluster.

Why a module of its own: the World keeps facts per spread, but these rules span spreads and
outlive them. The design rule behind all of them is "do no harm": the federation never deletes or
moves a workload that no rule asked it to.

- **One spread per target.** Two spreads naming the same hub Deployment would write the same
  member Deployments with different shares and fight. The senior one (earliest creationTimestamp,
  then name) holds the target; the others are refused with `TargetConflict` naming the holder and
  are not placed. A holder that is already placed is never displaced — only a holder not placed
  yet gives way to a claimant that ranks before it — so a late, older claimant (one whose spec was
  invalid until now) cannot take running replicas away. When the holder is deleted, the next
  claimant in rank order takes the target.
- **A restart decides nothing it could not decide before.** While the hub is being listed nothing
  is placed yet, so "placed" cannot settle a conflict; the recorded status does. A spread whose
  hub status shows it placed (a `Placed` condition) and not refused with `TargetConflict` is the
  *recorded holder* (`recorded_holder`); claimants rank recorded holders first, then by seniority
  (`rank`). So the holder the last coordinator wrote keeps the target whatever order the listing
  brings the spreads in, and an older spread refused with `TargetConflict` stays refused; on a
  fresh hub (no statuses) seniority decides, as before. A holder displaced before it was placed is
  refused, not deleted: its workloads, if an earlier coordinator made any, are kept (fail static).
- **`targetRef` is fixed on a live spread.** Changing it would move every replica to another
  Deployment at once; the edit is refused with `TargetRefImmutable` and the last valid spec stays
  in force (the caller keeps it: this module only records the refusal). A restarted coordinator
  has no live spread to compare with: the target in the spread's status (`status.targetRef`,
  written with every placement) stays in force instead (`in_force`), and the edit is refused the
  same way; the rest of the spec is taken as written (the last valid one is not recorded).
- **Deletion policy.** A deleted spread's removals orphan its workloads unless its spec said
  `deletionPolicy: Delete`. The deletion and its policy are remembered (the most recent
  `REMEMBERED_DELETIONS` only) so that an agent that was away when the spread was deleted gets the
  same answer at its resync. When the spread's latest version on the hub is not in force (an edit
  refused — a targetRef change — or invalid), the last valid spec places it, but the deletion
  deletes only if both say `Delete` (`not_in_force`): what `kubectl get` shows never deletes
  more than the user asked, and a refused edit to `Orphan` is heeded (when in doubt, orphan).
- **Re-creation adopts; `Delete` waits for it** (`hold`, `settle`). A spread deleted and created
  again under the same key (`kubectl replace --force`, a GitOps replace sync, re-applying after a
  mistaken prune) takes over what the deleted one ran: its agents adopt the member Deployments
  (`agents.ownership`). So a `deletionPolicy: Delete` removal is not sent at once but held for
  `RECREATE_GRACE`: a spread of the same key created within it turns the removal into an orphaning
  one (the workload is released, then adopted by the new spread, pods untouched); only a hold
  that ends with no such spread deletes. An `Orphan` removal goes at once (the release leaves a
  mark the new spread adopts by). While held, a resync removes nothing for that key.
- **Nothing is removed by inference from absence** (`leftover`). At a resync, a spread an agent
  says it applies but is not sent is removed only when this coordinator knows why: the spread is
  live and placed elsewhere (the cluster is no longer selected: kept until the cluster's first
  report, then handed over as any cluster leaving the selection, `Leftover.deselected`), or it
  saw the spread deleted. A
  spread it never knew — deleted while it was down, or a hub that is empty, restored, or the wrong
  one — is left to the agent as it is (fail static): an empty hub must not un-manage or delete
  every workload of the federation.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
from collections.abc import Callable, Collection, Container, Mapping

from federation.api import spread as spread_api

TARGET_CONFLICT = "TargetConflict"
TARGET_REF_IMMUTABLE = "TargetRefImmutable"
REMEMBERED_DELETIONS = 10_000
"""How many deleted spreads (and their deletion policies) are remembered for late resyncs."""
RECREATE_GRACE = datetime.timedelta(seconds=15)
"""How long a `deletionPolicy: Delete` removal is held for the spread to be created again (a
`kubectl replace --force` or a GitOps replace creates it within a second or two): within it, a
spread of the same key adopts the workload instead of seeing it deleted and recreated."""
RECREATED = "spread created again: its new incarnation adopts the workload"

Target = tuple[str, str, str]
"""(namespace, kind, name) of a spread's targetRef: a Deployment and a ReplicaSet of one name are
two targets."""


@dataclasses.dataclass(frozen=True)
class Refusal:
    """Why a spread that passed validation is not in force: reason, message, rejected generation."""

    reason: str
    message: str
    generation: int | None


@dataclasses.dataclass(frozen=True)
class Leftover:
    """What a resync does with a spread an agent applies but is not sent an assignment for."""

    remove: bool
    """False: nothing is sent; the agent keeps its workload and its last assignment."""
    orphan: bool = False
    """For a removal: leave the workload running, unmanaged (else it is deleted)."""
    reason: str = ""
    """Why: for the removal's `reason` and the logs."""
    deselected: bool = False
    """Kept for now: the live spread no longer selects the cluster, whose pods are not known yet.
    The cluster is handled as any cluster leaving the selection once it reports (deselection is a
    move: its Ready pods stay until their replacements are Ready)."""


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The answer to a claim: admitted or not, and the not-yet-placed spreads it displaced."""

    admitted: bool
    displaced: tuple[str, ...] = ()


def target_of(item: spread_api.FederatedSpread) -> Target:
    """The hub workload spread `item` names."""
    ref = item.spec.target_ref
    return (item.metadata.namespace or "default", ref.kind, ref.name)


def seniority(item: spread_api.FederatedSpread) -> tuple[str, str]:
    """Sort key of claimants: creationTimestamp (RFC 3339 sorts as text), then name."""
    created = (item.metadata.model_extra or {}).get("creationTimestamp")
    return (str(created) if created else "", item.metadata.name)


def recorded_holder(item: spread_api.FederatedSpread) -> bool:
    """Whether spread `item`'s hub status records it holding its target: placed (a `Placed`
    condition), and not refused with `TargetConflict` (a refused spread's status keeps what it
    showed before, so only the Valid condition's reason tells)."""
    conditions = item.status.conditions if item.status is not None else []
    refused = any(c.type == "Valid" and c.status == "False" and c.reason == TARGET_CONFLICT
                  for c in conditions)
    return not refused and any(c.type == "Placed" for c in conditions)


def in_force(item: spread_api.FederatedSpread) -> spread_api.FederatedSpread:
    """Spread `item` as it is in force after a restart: with the target its status records
    (`status.targetRef`, written while it was placed) when it is the recorded holder and its
    `targetRef` names another workload — an edit the last coordinator refused, or one made while
    no coordinator ran, would otherwise move every replica at the next start. The rest of the
    spec as it is on the hub (the last valid one is not recorded)."""
    recorded = item.status.target_ref if item.status is not None else None
    if recorded is None or recorded.names(item.spec.target_ref) or not recorded_holder(item):
        return item
    try:
        target = spread_api.TargetRef.model_validate(recorded.model_dump(by_alias=True))
    except ValueError:  # a kind this version cannot place: the spec as written, as before
        return item
    spec = item.spec.model_copy(update={"target_ref": target})
    return item.model_copy(update={"spec": spec})


def rank(item: spread_api.FederatedSpread) -> tuple[bool, tuple[str, str]]:
    """Sort key of claimants of one target: the recorded holder first, then by seniority."""
    return (not recorded_holder(item), seniority(item))


class Lifecycle:
    """Target holders, refusals, and the deletion policies of deleted spreads."""

    def __init__(self) -> None:
        self._claimants: dict[Target, dict[str, spread_api.FederatedSpread]] = {}
        self._holders: dict[Target, str] = {}
        self._refused: dict[str, Refusal] = {}
        self._deleting: collections.OrderedDict[str, spread_api.DeletionPolicy] = collections.OrderedDict()
        self._unapplied: dict[str, str] = {}
        """Per live spread whose latest hub version is not in force: that version's deletionPolicy."""
        self._held: dict[str, datetime.datetime] = {}
        """`Delete` removals held for a re-creation (`hold`), until when."""

    def holder_against(self, item: spread_api.FederatedSpread, *, placed: Container[str]) -> str | None:
        """The spread whose hold on `item`'s target would refuse `item`'s claim now (None: the
        claim would be admitted); asks without claiming (the admission webhook asks this)."""
        holder = self._holders.get(target_of(item))
        if holder is None or holder == item.key:
            return None
        if holder not in placed and rank(item) < rank(self._claimants[target_of(item)][holder]):
            return None  # a claimant ranking first displaces a holder not placed yet
        return holder

    def claim(self, item: spread_api.FederatedSpread, *, placed: Container[str]) -> Verdict:
        """Spread `item` (valid, with its current targetRef) asks for its target."""
        key, target = item.key, target_of(item)
        blocked_by = self.holder_against(item, placed=placed)
        self._leave(key, keep=target)
        claimants = self._claimants.setdefault(target, {})
        claimants[key] = item
        self._refused.pop(key, None)
        self._deleting.pop(key, None)  # re-created under the same name
        if blocked_by is not None:
            self._refused[key] = self._conflict(item, holder=blocked_by)
            return Verdict(admitted=False)
        self._unapplied.pop(key, None)  # this version is in force
        holder = self._holders.get(target)
        self._holders[target] = key
        if holder is None or holder == key:
            return Verdict(admitted=True)
        self._refused[holder] = self._conflict(claimants[holder], holder=key)
        return Verdict(admitted=True, displaced=(holder,))

    def refuse_target_change(self, item: spread_api.FederatedSpread, *, current: str) -> None:
        """Spread `item` is live (or recorded placed) on workload `current` (`TargetRef.described`)
        and its edit names another: refused."""
        self._refused[item.key] = Refusal(
            reason=TARGET_REF_IMMUTABLE, generation=item.metadata.generation,
            message=target_change_message(current=current, wanted=item.spec.target_ref.described))
        self.not_in_force(item.key, deletion_policy=item.spec.deletion_policy)

    def not_in_force(self, key: str, *, deletion_policy: str) -> None:
        """Live spread `key`'s latest hub version is not in force (refused, or invalid: then its
        `deletionPolicy` as written, "" if none): its deletion deletes only if that says Delete too."""
        self._unapplied[key] = deletion_policy

    def release(self, key: str) -> spread_api.FederatedSpread | None:
        """Spread `key` was deleted: the spread that now holds its target (to admit), if any."""
        self._refused.pop(key, None)
        self._unapplied.pop(key, None)
        for target, claimants in list(self._claimants.items()):
            if claimants.pop(key, None) is None:
                continue
            if not claimants:
                del self._claimants[target]
            if self._holders.get(target) != key:
                return None
            del self._holders[target]
            if not claimants:
                return None
            successor = min(claimants.values(), key=rank)
            self._holders[target] = successor.key
            self._refused.pop(successor.key, None)
            return successor
        return None

    def refusals(self) -> Mapping[str, Refusal]:
        """Every spread refused now, by key."""
        return dict(self._refused)

    def deleted(self, key: str, policy: spread_api.DeletionPolicy) -> None:
        """Spread `key`, whose spec in force said `policy`, was deleted: with `policy`, or Orphan if
        its latest version, not in force, did not say Delete (`not_in_force`)."""
        if self._unapplied.pop(key, "Delete") != "Delete":
            policy = "Orphan"
        self._deleting.pop(key, None)
        self._deleting[key] = policy
        while len(self._deleting) > REMEMBERED_DELETIONS:
            self._deleting.popitem(last=False)

    def deletion(self, key: str) -> spread_api.DeletionPolicy | None:
        """The policy spread `key` was deleted with, if this coordinator saw the deletion (and it is
        among the last `REMEMBERED_DELETIONS`, and no spread of that name was created since)."""
        return self._deleting.get(key)

    def orphans(self, key: str) -> bool:
        """Whether removing deleted spread `key` from an agent leaves its workloads running: yes
        unless it was deleted with `deletionPolicy: Delete` (and that is remembered)."""
        return self.deletion(key) != "Delete"

    def hold(self, key: str, *, until: datetime.datetime) -> None:
        """Deleted spread `key`'s `Delete` removal waits until `until` for a spread of its key
        (module docstring); `settle` sends it."""
        self._held[key] = until

    def held(self, key: str) -> bool:
        """Whether deleted spread `key`'s removal is held now."""
        return key in self._held

    def held_due(self, now: datetime.datetime) -> set[str]:
        """The held removals whose wait is over at `now` (for the timer to settle)."""
        return {key for key, until in self._held.items() if until <= now}

    def settle(self, *, now: datetime.datetime, live: Callable[[str], bool]) -> list[tuple[str, bool]]:
        """The held removals to send now, as (key, orphan), in key order: orphaning for a key a
        live spread holds again (whatever its target: a removal sent after that spread's
        assignment would remove the assignment too), deleting for one whose wait is over."""
        settled = []
        for key, until in sorted(self._held.items()):
            if live(key):
                settled.append((key, True))
            elif until <= now:
                settled.append((key, False))
            else:
                continue
            del self._held[key]
        return settled

    def leftover(self, key: str, *, live_uid: str | None, placed: bool,
                 applied_uids: Collection[str]) -> Leftover:
        """What a resync does with spread `key`, which an agent applies (its member Deployments carry
        `applied_uids`; "" from an agent that does not say) but is not sent an assignment for.

        `live_uid`: the uid of the live spread of that key (None: no such spread); `placed`:
        whether it is placed. Nothing is removed by inference from absence (module docstring).
        """
        if live_uid is not None:
            if not placed:
                return Leftover(remove=False)  # waiting for its Deployment or the hub: keep
            if all(uid in ("", live_uid) for uid in applied_uids):
                # Unknown is not zero: what runs there is not known before its report (a restart
                # may have lost the status that kept its pods); removed later, by the handover.
                return Leftover(remove=False, deselected=True, reason="cluster no longer selected")
            # An earlier spread of this name, gone: release it rather than delete (when in doubt).
            return Leftover(remove=True, orphan=True, reason="an earlier spread of this name")
        policy = self.deletion(key)
        if policy is None:
            return Leftover(remove=False)  # never known here: the agent keeps it (fail static)
        if key in self._held:
            return Leftover(remove=False)  # held for a re-creation: it may yet be adopted
        return Leftover(remove=True, orphan=policy != "Delete", reason="spread deleted")

    def _leave(self, key: str, *, keep: Target) -> None:
        """Spread `key` claims `keep` now: forget its claim on any other target (a refused spread
        may point elsewhere; a holder's targetRef never changes)."""
        for target, claimants in list(self._claimants.items()):
            if target != keep and key in claimants and self._holders.get(target) != key:
                del claimants[key]
                if not claimants:
                    del self._claimants[target]

    @staticmethod
    def _conflict(item: spread_api.FederatedSpread, *, holder: str) -> Refusal:
        return Refusal(reason=TARGET_CONFLICT, generation=item.metadata.generation,
                       message=conflict_message(item, holder=holder))


def conflict_message(item: spread_api.FederatedSpread, *, holder: str) -> str:
    """Why spread `item` may not place its target: spread `holder` holds it."""
    namespace, kind, name = target_of(item)
    return (f"{kind} {namespace}/{name} is already spread by FederatedSpread {holder}; "
            "this spread places nothing until that one is deleted")


def target_change_message(*, current: str, wanted: str) -> str:
    """Why a live spread's edit from workload `current` to `wanted` (each `TargetRef.described`) is
    refused."""
    return (f"targetRef cannot change on a live spread (from {current} to {wanted}); "
            f"the spread keeps spreading {current}. "
            "To spread another workload, delete this spread and create a new one")
