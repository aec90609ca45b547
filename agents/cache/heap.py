"""Handing freed heap back to the operating system after the agent's big transient work.

Why: listing a big member parses hundreds of pages of JSON, each a megabyte or more of bytes and
text that is freed once its objects are converted, and glibc keeps much of what is freed for reuse
instead of returning it (freed chunks in its per-thread arenas, below the top of the heap). On the
inventory benchmark's member (5,000 nodes, 100,000 pods) that was about 10 MB of the agent's
resident memory after the first sync, and `malloc_trim(0)` returns it in a millisecond or two. So
the cache trims once each resource has been listed, and the inventory reporter after each pool
rebuild (which follows every relist of nodes or bound pods).

Where the C library has no `malloc_trim` (musl, macOS) `release` does nothing: those allocators
return memory on their own terms.
"""

from __future__ import annotations

import ctypes
import functools
import logging
from collections.abc import Callable

LOG = logging.getLogger(__name__)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, from the C library this process already runs on; None elsewhere."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    found: Callable[[int], int] = trim
    return found


def release() -> bool:
    """Return freed heap memory to the operating system; False where the C library cannot."""
    trim = _malloc_trim()
    if trim is None:
        return False
    try:
        trim(0)
    except OSError as error:  # never worth failing the caller for
        LOG.debug("malloc_trim failed", extra={"error": error})
        return False
    return True
