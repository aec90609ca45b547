"""`python -m federation.cli`: the `fedspread` command without the installed console script."""

from __future__ import annotations

from federation.cli import main

if __name__ == "__main__":
    main(prog_name="fedspread")
