"""The JSON shape of a placement, as `fedspread simulate -o json` and `fedspread get placement -o json`
print it: `{"replicas", "unplaced", "clusters", "subsets": [{"name", "replicas", "clusters",
"reasons"}]}`, plus `"ready"` for a live placement (and a subset's `"revisions"` while a rollout
runs, and `"usage"` for one live spread) and `"rebalance"` where a failback is possible
(`simulate --current`). A subset's `"reasons"` are the rules that decided
its number, as the table's notes show them ("cap 30 reached", "floor 2", "topologySpread
topology.fedspread.io/region maxSkew 1", "dc1: not ready"); the key came later than the others, so
a reader of older documents (`simulate --current`) must not require it.

Why one function: the offline simulation (the placement core's result) and the live placement (the
SDK's view of the coordinator's answer) are different types, but scripts parse both outputs as one
format; building the document in one place keeps the keys, their order and their types identical.
It lives in the API layer, below both the core and the SDK, and needs nothing but the values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol


class SubsetShares(Protocol):
    """What the document needs of one subset's placement."""

    @property
    def name(self) -> str:
        """The subset's name."""

    @property
    def replicas(self) -> int:
        """Replicas placed in the subset."""

    @property
    def clusters(self) -> Mapping[str, int]:
        """Replicas per cluster in the subset."""

    @property
    def reasons(self) -> Sequence[str]:
        """The rules that decided the subset's number, in the order the placement noted them."""


def document(
    *,
    replicas: int,
    unplaced: int,
    clusters: Mapping[str, int],
    subsets: Iterable[SubsetShares],
    ready: Mapping[str, int] | None = None,
    rebalance: Mapping[str, Any] | None = None,
    revisions: Mapping[str, Mapping[str, int]] | None = None,
    usage: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The placement document; with `ready`, a `"ready"` count for every cluster in `clusters`; with
    `rebalance`, the failback a `spec.rebalance` would make (`{"policy", "moves": [{"from", "to",
    "replicas"}]}`, `core.failback.document`); with `revisions` (per subset name, while a rollout
    runs), a subset's `"revisions"`: its pods per template revision; with `usage` (one live spread's),
    `"usage"`: `{"metrics", "readyPods", "unmeasuredPods", "withoutMetrics",
    "stale"}`."""
    shape: dict[str, Any] = {
        "replicas": replicas,
        "unplaced": unplaced,
        "clusters": dict(clusters),
        "subsets": [{"name": s.name, "replicas": s.replicas, "clusters": dict(s.clusters),
                     "reasons": list(s.reasons)} for s in subsets],
    }
    for subset in shape["subsets"]:
        if revisions and revisions.get(subset["name"]):
            subset["revisions"] = dict(revisions[subset["name"]])
    if ready is not None:
        shape["ready"] = {name: ready.get(name, 0) for name in clusters}
    if rebalance is not None:
        shape["rebalance"] = dict(rebalance)
    if usage is not None:
        shape["usage"] = dict(usage)
    return shape
