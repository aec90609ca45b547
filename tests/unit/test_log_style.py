"""One logging style: loggers named by their module, a line's fields passed as `extra=`.

Why a test: two styles had grown side by side. Half the modules logged under a hand-picked name
(`fedspread.agent.link`, shared by two modules, so a line did not say which wrote it), the other half
under their module's; and half wrote their fields into the message (`"watch interrupted kind=%s"`),
so `--log-format json` gave a pipeline one opaque string where the other half gave it keys. The text
format writes the extras as `key=value` after the message, so a line reads as before either way.
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
LEVELS = {"debug", "info", "warning", "error", "exception", "critical"}
FIELD_IN_MESSAGE = re.compile(r"\b[a-z_]+=%[-#0 +]*\d*(?:\.\d+)?[sdrf]")


def modules() -> list[pathlib.Path]:
    return sorted(p for package in ("federation", "agents") for p in (ROOT / package).rglob("*.py")
                  if "_pb2" not in p.name)


def dotted(path: pathlib.Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def loggers_not_by_module(source: str, module: str) -> list[int]:
    """Lines of module-level `getLogger(...)` calls that name neither `__name__` nor the module."""
    found = []
    for node in ast.parse(source).body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                and value.func.attr == "getLogger" and value.args):
            continue
        name = value.args[0]
        if isinstance(name, ast.Name) and name.id == "__name__":
            continue
        if isinstance(name, ast.Constant) and name.value == module:  # a module that also runs as __main__
            continue
        found.append(node.lineno)
    return found


def fields_in_messages(source: str) -> list[int]:
    """Lines of log calls whose message spells a field (`key=%s`) instead of passing it in `extra=`."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in LEVELS and node.args):
            continue
        message = node.args[0]
        if isinstance(message, ast.Constant) and isinstance(message.value, str) \
                and FIELD_IN_MESSAGE.search(message.value):
            lines.append(node.lineno)
    return lines


def test_every_logger_is_named_by_its_module() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}" for path in modules()
             for line in loggers_not_by_module(path.read_text(encoding="utf-8"), dotted(path))]
    assert not found, "use logging.getLogger(__name__):\n" + "\n".join(found)


def test_log_fields_go_in_extra() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}" for path in modules()
             for line in fields_in_messages(path.read_text(encoding="utf-8"))]
    assert not found, "pass the fields as extra={...}, not key=%s in the message:\n" + "\n".join(found)


@pytest.mark.parametrize(("source", "lines"), [
    ('LOG.warning("watch interrupted kind=%s failures=%d", kind, n)', [1]),
    ('log.info("pod rescheduled pod=%s/%s", ns, name)', [1]),
    ('LOG.warning("watch interrupted", extra={"kind": kind})', []),
    ('LOG.info("metrics served on %s:%d", addr, port)', []),
])
def test_the_field_rule_tells_fields_from_prose(source: str, lines: list[int]) -> None:
    assert fields_in_messages(source) == lines


@pytest.mark.parametrize(("source", "lines"), [
    ('log = logging.getLogger(__name__)', []),
    ('log = logging.getLogger("agents.link.client")', []),
    ('LOG = logging.getLogger("fedspread.agent.link")', [1]),
    ('import logging\nlog = logging.getLogger("agents.link")', [2]),
])
def test_the_logger_rule_takes_only_the_module_s_name(source: str, lines: list[int]) -> None:
    assert loggers_not_by_module(source, "agents.link.client") == lines
