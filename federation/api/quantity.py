"""Kubernetes resource quantities as exact fractions.

Why exact: capacity fit divides free resources by per-pod requests; floats turn `0.1 * 3` into a
pod that does not fit. `Fraction` keeps "100m" cpu, "1.5Gi" memory and "110" pods exact, with the
same grammar as apimachinery's resource.Quantity (binary Ki..Ei, decimal n..E, and e-notation).
"""

from __future__ import annotations

import fractions
import functools
import math
import re

NANO = 10**9
"""Nano-units per unit: the finest amount a quantity text can carry ("1n")."""

MAX_EXPONENT = 308
"""The largest |exponent| of e-notation accepted ("1e308"). Kubernetes caps quantities near 2^63
(~9.2e18), so nothing real comes close; without a bound, an agent's report or a template saying
"1e999999999" would make the coordinator compute 10**999999999 (minutes, and gigabytes) under its
lock. Out-of-range exponents are a ValueError like any other malformed quantity."""

Nanos = int | fractions.Fraction
"""An amount counted in nano-units: an int whenever it is a whole number of them (the usual case).

Why: the placement hot path compares and adds quantities millions of times; Python ints are exact
and some thirty times faster than Fractions, and every quantity the apiserver emits is a whole
number of nano-units. A Fraction remains for the rare text finer than that ("1e-12")."""

_GRAMMAR = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$"
)

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": fractions.Fraction(1, 10**9),
    "u": fractions.Fraction(1, 10**6),
    "m": fractions.Fraction(1, 10**3),
    "k": fractions.Fraction(10**3),
    "M": fractions.Fraction(10**6),
    "G": fractions.Fraction(10**9),
    "T": fractions.Fraction(10**12),
    "P": fractions.Fraction(10**15),
    "E": fractions.Fraction(10**18),
}


def parse_quantity(value: str | int | float) -> fractions.Fraction:
    """Parse a quantity ("250m", "2Gi", "1e3", 110) into an exact Fraction; ValueError if invalid."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    if isinstance(value, int):
        return fractions.Fraction(value)
    text = repr(value) if isinstance(value, float) else value.strip()
    match = _GRAMMAR.match(text)
    if not match:
        raise ValueError(f"{value!r} is not a Kubernetes quantity (examples: 500m, 2, 4Gi, 1e3)")
    number = fractions.Fraction(match.group("number"))
    suffix = match.group("suffix") or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    if suffix:
        digits = suffix[1:].lstrip("+-").lstrip("0")
        if len(digits) > len(str(MAX_EXPONENT)) or int(digits or "0") > MAX_EXPONENT:
            raise ValueError(f"{value!r}: the exponent is out of range (at most e{MAX_EXPONENT})")
        return number * fractions.Fraction(10) ** int(suffix[1:])
    return number


def format_quantity(amount: fractions.Fraction, *, resource: str = "") -> str:
    """A compact, parseable text for an amount: milli-units for cpu, plain or binary otherwise."""
    if amount.denominator == 1:
        whole = amount.numerator
        if resource == "memory" or resource.endswith("storage"):
            for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
                unit = _BINARY[suffix]
                if whole and whole % unit == 0:
                    return f"{whole // unit}{suffix}"
        return str(whole)
    milli = amount * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    nano = amount * 10**9
    return f"{nano.numerator // nano.denominator}n"


def format_at_least(amount: fractions.Fraction, *, resource: str = "") -> str:
    """`format_quantity`, rounded up to the next nano-unit when the amount is finer than that.

    For amounts that must never be understated (a node's requested resources: less would promise
    room the node lacks); `format_quantity` alone truncates such an amount down.
    """
    text = format_quantity(amount, resource=resource)
    if parse_quantity(text) < amount:
        text = f"{math.ceil(amount * NANO)}n"
    return text


@functools.lru_cache(maxsize=4096)
def nanos(amount: fractions.Fraction) -> Nanos:
    """`amount` in nano-units: an int when exact, else the exact Fraction (amounts repeat: cached)."""
    scaled = amount * NANO
    return scaled.numerator if scaled.denominator == 1 else scaled
