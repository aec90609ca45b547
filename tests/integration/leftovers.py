"""Processes a test started that may have outlived it, found by what their command lines mention.

Why a module: a benchmark run by a test starts a sandbox, webhooks, a coordinator and agents in a
directory of its own, and must leave nothing running; the bench tests check that the same way.
"""

from __future__ import annotations

import pathlib


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that mention `text` (the sandbox's directory)."""
    found = []
    for cmdline in pathlib.Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:  # the process ended meanwhile
            continue
        if any(text.encode() in arg for arg in args):
            found.append(b" ".join(args).decode(errors="replace")[:200])
    return found
