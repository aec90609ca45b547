"""The records the coordinator's World keeps per spread and per cluster.

Why a module of their own: the World stores them, and its selection index (`selection_index`) and
capacity views (`member_views`) read them through read-only mappings of the World's dictionaries.
Keeping the records here lets all three import them without importing each other in a circle.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from federation.api import cluster, common
from federation.api import spread as spread_api


@dataclasses.dataclass
class SpreadEntry:
    """One spread as the coordinator knows it: the object, its target's replicas and template."""

    spread: spread_api.FederatedSpread
    generation: int
    replicas: int | None = None
    template: dict[str, Any] | None = None
    key: str = dataclasses.field(init=False, compare=False)
    """`namespace/name` (read about twenty times per spread in a round: kept, not formatted again)."""
    lost_after: datetime.timedelta = dataclasses.field(init=False, compare=False)
    """How long an agent may be silent before its cluster counts as lost for this spread (its
    spec's `failover.clusterLostSeconds`; read for every cluster a round asks about)."""

    def __post_init__(self) -> None:
        self.key = self.spread.key
        self.lost_after = datetime.timedelta(seconds=self.spread.spec.failover.cluster_lost_seconds)

    def refresh(self, item: spread_api.FederatedSpread) -> None:
        """The same spread's object again, its spec equal (the caller compared them: a status or
        metadata update), so what was kept of it (`key`, `lost_after`) stands."""
        if item.key != self.key:
            raise ValueError(f"{item.key} is not {self.key}: a spread's entry is refreshed only by itself")
        self.spread = item

    @property
    def spec(self) -> spread_api.FederatedSpreadSpec:
        """The spread's spec."""
        return self.spread.spec

    @property
    def uid(self) -> str:
        """The hub object's metadata.uid (an extra field of ObjectMeta); empty when absent. Agents
        manage a member Deployment only for the spread incarnation whose uid it carries."""
        return uid_of(self.spread)


def uid_of(item: spread_api.FederatedSpread) -> str:
    """A spread object's metadata.uid (an extra field of ObjectMeta); empty when absent."""
    return str((item.metadata.model_extra or {}).get("uid") or "")


@dataclasses.dataclass(frozen=True)
class ClusterFacts:
    """What a MemberCluster says of its cluster: topology labels and cluster taints."""

    labels: dict[str, str]
    taints: tuple[common.Taint, ...]

    @property
    def cordon(self) -> cluster.Cordon:
        """How the cluster taints cordon it ("" when they do not)."""
        return cluster.cordon_of(self.taints)


@dataclasses.dataclass(frozen=True)
class Target:
    """A spread's hub Deployment as last seen: its `spec.replicas` and the object itself."""

    replicas: int | None
    template: dict[str, Any] | None
