"""Label selectors in their query-string form (`a=b,c!=d,e in (x,y),!f`), parsed and matched.

Why here: the node simulator's resource metrics API filters pods and nodes by the `labelSelector`
a client sends (kubectl top, the HPA controller, the agents), as metrics-server does through
apimachinery's `labels.Parse`. The grammar is that one: requirements joined by commas, each
`key`, `!key`, `key=v`, `key==v`, `key!=v`, `key in (v,...)`, `key notin (v,...)`, `key>n`, `key<n`;
keys are qualified names, values label values. A malformed selector is a `SelectorError` (the server
answers 400 BadRequest).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence

_NAME = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)"
_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}$")
_VALUE = re.compile(rf"^({_NAME})?$")
_TOKEN = re.compile(r"\s*(==|!=|=|!|\(|\)|,|<|>|[^\s,()=!<>]+)")
_EQUALITY = {"=": "=", "==": "=", "!=": "!="}


class SelectorError(ValueError):
    """A label selector that does not parse."""


@dataclasses.dataclass(frozen=True)
class Requirement:
    """One requirement: `operator` is one of =, !=, in, notin, exists, !, gt, lt."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether `labels` meet this requirement."""
        has, value = self.key in labels, labels.get(self.key, "")
        if self.operator in ("=", "in"):
            return has and value in self.values
        if self.operator in ("!=", "notin"):
            return not has or value not in self.values
        if self.operator == "exists":
            return has
        if self.operator == "!":
            return not has
        if not has or not re.fullmatch(r"-?\d+", value):
            return False
        return int(value) > int(self.values[0]) if self.operator == "gt" else int(value) < int(self.values[0])


def _tokens(text: str) -> list[str]:
    tokens, position = [], 0
    while position < len(text):
        if not text[position:].strip():
            break
        match = _TOKEN.match(text, position)
        if match is None:  # pragma: no cover - the pattern matches any non-blank character
            raise SelectorError(f"unparseable label selector {text!r}")
        tokens.append(match.group(1))
        position = match.end()
    return tokens


def _key(token: str | None, text: str) -> str:
    if token is None or not _KEY.match(token):
        raise SelectorError(f"label selector {text!r}: {token!r} is not a valid label key")
    return token


def _value(token: str, text: str) -> str:
    if not _VALUE.match(token):
        raise SelectorError(f"label selector {text!r}: {token!r} is not a valid label value")
    return token


def parse(text: str) -> list[Requirement]:
    """The requirements of a selector (empty: every object matches); SelectorError if malformed."""
    tokens, requirements, i = _tokens(text), [], 0

    def at(index: int) -> str | None:
        return tokens[index] if index < len(tokens) else None

    while i < len(tokens):
        if at(i) == "!":
            requirements.append(Requirement(_key(at(i + 1), text), "!"))
            i += 2
        else:
            key, operator = _key(at(i), text), at(i + 1)
            i += 2
            if operator in (None, ","):
                requirements.append(Requirement(key, "exists"))
                i -= 1
            elif operator in _EQUALITY:
                value = "" if at(i) in (None, ",") else _value(str(at(i)), text)
                requirements.append(Requirement(key, _EQUALITY[operator], (value,)))
                i += 0 if at(i) in (None, ",") else 1
            elif operator in ("<", ">"):
                if at(i) is None or not re.fullmatch(r"-?\d+", str(at(i))):
                    raise SelectorError(f"label selector {text!r}: {operator} needs an integer")
                requirements.append(Requirement(key, "gt" if operator == ">" else "lt", (str(at(i)),)))
                i += 1
            elif operator in ("in", "notin"):
                values, i = _set(tokens, i, text)
                requirements.append(Requirement(key, operator, values))
            else:
                raise SelectorError(f"label selector {text!r}: unexpected {operator!r} after {key!r}")
        if at(i) is not None:
            if at(i) != "," or at(i + 1) is None:
                raise SelectorError(f"label selector {text!r}: expected a comma and a requirement "
                                    f"at {' '.join(tokens[i:i + 2])!r}")
            i += 1
    return requirements


def _set(tokens: Sequence[str], i: int, text: str) -> tuple[tuple[str, ...], int]:
    """The values of `(v1,v2)` starting at tokens[i]; and the index after the `)`."""
    if i >= len(tokens) or tokens[i] != "(":
        raise SelectorError(f"label selector {text!r}: 'in' and 'notin' need a parenthesised set")
    values, i = [], i + 1
    while i < len(tokens) and tokens[i] != ")":
        if tokens[i] == ",":
            i += 1
            continue
        values.append(_value(tokens[i], text))
        i += 1
    if i >= len(tokens):
        raise SelectorError(f"label selector {text!r}: a set is not closed with ')'")
    if not values:
        raise SelectorError(f"label selector {text!r}: a set of 'in' or 'notin' cannot be empty")
    return tuple(values), i + 1


def matches(requirements: Sequence[Requirement], labels: Mapping[str, str] | None) -> bool:
    """Whether `labels` meet every requirement."""
    return all(r.matches(labels or {}) for r in requirements)
