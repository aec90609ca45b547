"""The `fedspread` command line: one package, one module per command, flags shared in `options`.

Why a package: every command parses flags, calls into the library, and prints; keeping them side
by side makes them look and fail alike (one line on stderr; exit 2 for the user's mistakes, exit 1
for failures at run time). Importing this package is cheap: commands are loaded when they run.
"""

from __future__ import annotations

from federation.cli.root import main

__all__ = ["main"]
