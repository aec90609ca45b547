"""Which shard owns a spread or a cluster: a stable hash of its key.

Why shards at all: a Ray actor is a whole worker process (~90 MB here), so one actor per spread or
per cluster would cost gigabytes for a few thousand objects. Instead a fixed number of
`SpreadShard` / `ClusterShard` actors each own the keys that hash to them.

Why sha256 and not `hash()`: Python salts `hash()` of strings per process (PYTHONHASHSEED), so two
processes — the coordinator before and after a restart, or the driver and a Ray worker — would
disagree on the owner. A cryptographic digest of the UTF-8 key gives every process, every Python
version and every platform the same answer, and spreads keys evenly.

Pure: no Ray, no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence


def shard_of(key: str, *, shards: int) -> int:
    """The shard in `[0, shards)` that owns `key` ("namespace/name" or a cluster name)."""
    if shards < 1:
        raise ValueError(f"shards must be at least 1, got {shards}")
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % shards


def partition(keys: Iterable[str], *, shards: int) -> list[list[str]]:
    """The keys grouped by owner: `shards` lists, each in first-seen order, every key once."""
    if shards < 1:
        raise ValueError(f"shards must be at least 1, got {shards}")
    groups: list[list[str]] = [[] for _ in range(shards)]
    seen: set[str] = set()
    for key in keys:
        if key not in seen:
            seen.add(key)
            groups[shard_of(key, shards=shards)].append(key)
    return groups


def group_by_shard(keys: Sequence[str], *, shards: int) -> list[list[int]]:
    """Indices into `keys` per owning shard (`shard_of`), each list in the keys' order."""
    groups: list[list[int]] = [[] for _ in range(shards)]
    for index, key in enumerate(keys):
        groups[shard_of(key, shards=shards)].append(index)
    return groups
