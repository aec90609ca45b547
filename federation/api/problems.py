"""Turning invalid input into a list of (field path, message) a person can act on.

Why: pydantic's own error text is written for developers. Users of `fedspread simulate`, the
coordinator's status conditions and the SDK all need the same thing — every problem at once, each
with the exact camelCase path into the YAML they wrote (`spec.subsets[1].maxReplicas`) — and never
a traceback. Cross-field rules carry their own paths through the error context (see
`federation.api.spread.cross_field_problems`).

Every problem in one pass: pydantic runs a model's cross-field rules only once its fields are
valid, so a user who fixed the two schema problems reported would then meet three cross-field
ones. `validate` therefore also validates a copy with the invalid optional fields removed, and
reports the cross-field problems of what remains beside the schema problems.
"""

from __future__ import annotations

import copy
import dataclasses
import pathlib
from typing import Any, TypeVar

import pydantic
import yaml

from federation.api import cluster, spread

ModelT = TypeVar("ModelT", bound=pydantic.BaseModel)


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing wrong with an input: where, and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class InvalidInput(ValueError):
    """Raised with every problem of an input document; `str()` lists them one per line."""

    def __init__(self, what: str, problems: list[Problem]) -> None:
        self.what = what
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{what} is invalid:\n{lines}")


def _join(prefix: str, part: str | int) -> str:
    if isinstance(part, int):
        return f"{prefix}[{part}]"
    return f"{prefix}.{part}" if prefix else part


def _path(loc: tuple[str | int, ...]) -> str:
    path = ""
    for part in loc:
        path = _join(path, part)
    return path


def _message(error: Any) -> str:
    message = str(error["msg"])
    if message.startswith("Value error, "):
        message = message[len("Value error, "):]
    if error["type"] == "extra_forbidden":
        message = "unknown field (check its spelling and indentation)"
    elif error["type"] == "missing":
        message = "required field is missing"
    elif error["type"] == "string_pattern_mismatch" and error["loc"][-1] == "name":
        message = (
            f"{error['input']!r} is not a DNS label: use lowercase letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    return message


def problems_from(error: pydantic.ValidationError) -> list[Problem]:
    """Every problem in a pydantic ValidationError, with camelCase paths."""
    return problems_from_items(list(error.errors()))


RULES = "spread_rules"
"""The error type of cross-field rules (`spread.cross_field_problems`)."""
_PRUNE_ROUNDS = 3


def _without(data: Any, loc: tuple[str | int, ...]) -> bool:
    """Remove the field at `loc` from `data` in place (a list item is left alone: removing it would
    renumber the paths); whether something was removed."""
    parent = data
    for part in loc[:-1]:
        try:
            parent = parent[part]
        except (KeyError, IndexError, TypeError):
            return False
    last = loc[-1] if loc else None
    if isinstance(parent, dict) and isinstance(last, str) and last in parent:
        del parent[last]
        return True
    return False


def _rules_beyond(
    model: type[pydantic.BaseModel], data: Any, error: pydantic.ValidationError
) -> list[Problem]:
    """The cross-field problems of `data` once its invalid fields are removed (as far as removing
    them leaves a document whose fields validate)."""
    pruned, items = copy.deepcopy(data), list(error.errors())
    touched: set[str] = set()
    """Paths of the objects a field was removed from: a rule judged there may only be reacting to
    the default that took the removed field's place (type: Random removed, so Fixed, so "adaptive
    settings apply only to Adaptive"), so none is reported."""
    for _ in range(_PRUNE_ROUNDS):
        schema = [item for item in items if item["type"] != RULES]
        removed = [tuple(item["loc"]) for item in schema if _without(pruned, tuple(item["loc"]))]
        if not removed:
            break  # only rules left, or nothing more to remove: what the rules said is the answer
        touched.update(_path(loc[:-1]) for loc in removed)
        try:
            model.model_validate(pruned)
        except pydantic.ValidationError as again:
            items = list(again.errors())
        else:
            return []
    # Only the rules' problems: a removed required field's "missing" is this function's doing.
    return [problem for problem in problems_from_items([item for item in items if item["type"] == RULES])
            if not any(_inside(problem.path, parent) for parent in touched)]


def _inside(path: str, parent: str) -> bool:
    """Whether `path` is `parent` or a field below it."""
    return path == parent or path.startswith((f"{parent}.", f"{parent}["))


def problems_from_items(items: list[Any]) -> list[Problem]:
    """`problems_from` of some of a ValidationError's `errors()`."""
    found: list[Problem] = []
    for item in items:
        base = _path(tuple(item["loc"]))
        if item["type"] == RULES:
            found += [Problem(_join(base, relative) if base else relative, message)
                      for relative, message in item["ctx"]["problems"]]
        else:
            found.append(Problem(base, _message(item)))
    return found


def validate(model: type[ModelT], data: Any, *, what: str) -> ModelT:
    """Validate `data` as `model`, raising InvalidInput with every problem: the schema's and, in
    the same pass, the cross-field rules' (module docstring)."""
    if data is None:
        raise InvalidInput(what, [Problem("", "the document is empty")])
    if not isinstance(data, dict):
        raise InvalidInput(what, [Problem("", f"expected a mapping, got {type(data).__name__}")])
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as error:
        found = problems_from(error)
        beyond = [problem for problem in _rules_beyond(model, data, error) if problem not in found]
        raise InvalidInput(what, found + beyond) from None


def read_documents(path: pathlib.Path | str) -> list[Any]:
    """Load every YAML document of a file; unreadable files and bad syntax become InvalidInput."""
    source = pathlib.Path(path)
    try:
        text = source.read_text()
    except OSError as error:
        raise InvalidInput(str(source), [Problem("", f"cannot read: {error.strerror}")]) from None
    try:
        return [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        reason = getattr(error, "problem", None) or str(error)
        raise InvalidInput(str(source), [Problem("", f"{where}not valid YAML ({reason})")]) from None


def read_yaml(path: pathlib.Path | str) -> Any:
    """Load a single-document YAML file (None when empty)."""
    documents = read_documents(path)
    if len(documents) > 1:
        raise InvalidInput(str(path), [Problem("", f"expected one YAML document, found {len(documents)}")])
    return documents[0] if documents else None


def load_spread(path: pathlib.Path | str) -> spread.FederatedSpread:
    """Read and validate a FederatedSpread YAML file."""
    return validate(spread.FederatedSpread, read_yaml(path), what=str(path))


def load_snapshot(path: pathlib.Path | str) -> cluster.CapacitySnapshot:
    """Read and validate a capacity snapshot (CLUSTERS.yaml)."""
    return validate(cluster.CapacitySnapshot, read_yaml(path), what=str(path))
