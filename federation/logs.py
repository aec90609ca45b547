"""Structured, quiet logging for fedspread's long-running processes (agent, coordinator).

Why one module: both processes print the same `time LEVEL logger message key=value ...` lines on
stderr, INFO by default, with the Kubernetes, gRPC and urllib3 libraries muted unless something is
really wrong — so operators grep one format everywhere.
"""

from __future__ import annotations

import logging
import sys

# Attributes every LogRecord has; anything else on a record came in through `extra=`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class KeyValueFormatter(logging.Formatter):
    """`time LEVEL logger message key=value ...` (extras from `log.info(..., extra={...})`)."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = [f"{k}={v}" for k, v in vars(record).items()
                  if k not in _STANDARD and not k.startswith("_") and v is not None]  # "_": libraries' own
        return f"{line} {' '.join(extras)}" if extras else line


def configure(level: str) -> None:
    """Structured lines on stderr; library loggers only speak up for real problems."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KeyValueFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("urllib3", "kubernetes", "grpc"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)  # retry chatter; we report
