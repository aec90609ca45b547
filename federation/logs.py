"""Structured, quiet logging for fedspread's long-running processes (agent, coordinator).

Why one module: both processes print the same `time LEVEL logger message key=value ...` lines on
stderr, INFO by default, with the Kubernetes, gRPC and urllib3 libraries muted unless something is
really wrong — so operators grep one format everywhere. With `--log-format json` each line is one
JSON object instead (`time`, `level`, `logger`, `message`, the extras as keys), for log pipelines
that parse rather than grep.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys

FORMATS = ("text", "json")
_chosen = "text"

# Attributes every LogRecord has; anything else on a record came in through `extra=`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class KeyValueFormatter(logging.Formatter):
    """`time LEVEL logger message key=value ...` (extras from `log.info(..., extra={...})`)."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = [f"{k}={v}" for k, v in vars(record).items()
                  if k not in _STANDARD and not k.startswith("_") and v is not None]  # "_": libraries' own
        return f"{line} {' '.join(extras)}" if extras else line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, the extras, and the
    exception's text when there is one. Values JSON cannot hold are written as their str()."""

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        found = {"time": when.isoformat(timespec="milliseconds"), "level": record.levelname,
                 "logger": record.name, "message": record.getMessage()}
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_") and value is not None and key not in found:
                found[key] = value
        if record.exc_info:
            found["exception"] = self.formatException(record.exc_info)
        return json.dumps(found, default=str)


def use_format(name: str) -> None:
    """The format `configure` sets up: "text" (key=value lines) or "json"."""
    global _chosen
    if name not in FORMATS:
        raise ValueError(f"log format must be one of {FORMATS}, not {name!r}")
    _chosen = name


def configure(level: str) -> None:
    """Structured lines on stderr (`use_format`); library loggers only speak up for real problems."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if _chosen == "json"
                         else KeyValueFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("urllib3", "kubernetes", "grpc"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)  # retry chatter; we report
