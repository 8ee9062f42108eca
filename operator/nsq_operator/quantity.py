"""Kubernetes quantities ("1.5Gi", "100m", "1e3") as exact numbers, and the canonical form
the apiserver stores them in (k8s.io/apimachinery's resource.Quantity).

The apiserver parses every quantity it is given and writes it back canonical: ``1024Mi``
is read back as ``1Gi``, ``1.5Gi`` as ``1536Mi``, ``1000`` as ``1k``, ``0.5`` as
``500m``. Comparing what the operator sends with what it reads back must therefore
compare values, never strings (``same``).

The rules, as resource.Quantity has them:

- the value is exact, rounded up (away from zero) to a multiple of 10^-9;
- the suffix keeps its family: binary (Ki..Ei), decimal SI (n, u, m, "", k .. E) or a
  decimal exponent (e3);
- a binary value whose magnitude is below 1024, or that is not a whole number, is
  written decimal SI instead;
- the canonical form has no fraction digits and the largest suffix that keeps the number
  whole: for decimal, an exponent that is a multiple of 3; for binary, a power of 1024;
- zero is ``0``; a sign only when negative.
"""
from __future__ import annotations

import re
from fractions import Fraction
from typing import Literal

Format = Literal["BinarySI", "DecimalSI", "DecimalExponent"]

_NUMBER = re.compile(r"^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}  # powers of 1024
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}  # powers of 10
_DECIMAL_SUFFIX = {power: suffix for suffix, power in _DECIMAL.items()}
_BINARY_SUFFIX = {power: suffix for suffix, power in _BINARY.items()}
_EXPONENT = re.compile(r"^[eE]([+-]?[0-9]+)$")
NANO = Fraction(1, 10**9)


class QuantityError(ValueError):
    """Not a Kubernetes quantity."""


def parse(text: str | int) -> tuple[Fraction, Format]:
    """The exact value (rounded up to 10^-9, as the apiserver does) and its suffix family."""
    if isinstance(text, bool):
        raise QuantityError(f"{text!r} is not a Kubernetes quantity")
    raw = str(text).strip()
    number = _NUMBER.match(raw)
    if number is None:
        raise QuantityError(f"{text!r} is not a Kubernetes quantity")
    sign, digits = number.groups()
    value = Fraction(digits)
    suffix = raw[number.end():]
    fmt: Format
    if suffix in _BINARY:
        value, fmt = value * 1024 ** _BINARY[suffix], "BinarySI"
    elif suffix in _DECIMAL:
        value, fmt = value * Fraction(10) ** _DECIMAL[suffix], "DecimalSI"
    elif (exponent := _EXPONENT.match(suffix)) is not None:
        value, fmt = value * Fraction(10) ** int(exponent.group(1)), "DecimalExponent"
    else:
        raise QuantityError(f"{text!r} is not a Kubernetes quantity")
    nanos = -((-value) // NANO)  # up to a whole number of nanos
    value = nanos * NANO
    return (-value if sign == "-" else value), fmt


def value(text: str | int) -> Fraction:
    return parse(text)[0]


def same(a: object, b: object) -> bool:
    """Equal as quantities (``1024Mi`` and ``1Gi``); unequal when either is not one."""
    try:
        return value(a) == value(b)  # type: ignore[arg-type]
    except (QuantityError, TypeError):
        return False


def _strip(number: int, base: int) -> tuple[int, int]:
    """``number`` = result * base**times, with ``result`` no longer divisible by base."""
    times = 0
    while number != 0 and number % base == 0:
        number //= base
        times += 1
    return number, times


def format_value(amount: Fraction, fmt: Format) -> str:
    """``amount`` (a multiple of 10^-9) written as the apiserver writes it."""
    if amount == 0:
        return "0"
    if fmt == "BinarySI" and (abs(amount) < 1024 or amount.denominator != 1):
        fmt = "DecimalSI"
    sign = "-" if amount < 0 else ""
    magnitude = abs(amount)
    if fmt == "BinarySI":
        mantissa, power = _strip(int(magnitude), 1024)
        while power > max(_BINARY.values()):  # beyond Ei: a bigger number of Ei
            mantissa, power = mantissa * 1024, power - 1
        return f"{sign}{mantissa}{_BINARY_SUFFIX.get(power, '')}"
    nanos = magnitude / NANO
    assert nanos.denominator == 1, "a quantity is a whole number of nanos"
    mantissa, times = _strip(int(nanos), 10)
    exponent = times - 9
    # down to a multiple of 3 (Go's remainder keeps the sign of the exponent)
    rest = exponent % 3 if exponent >= 0 else -((-exponent) % 3)
    if rest in (1, -2):
        mantissa, exponent = mantissa * 10, exponent - 1
    elif rest in (2, -1):
        mantissa, exponent = mantissa * 100, exponent - 2
    if fmt == "DecimalExponent":
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    while exponent > max(_DECIMAL.values()):  # beyond E: a bigger number of E
        mantissa, exponent = mantissa * 1000, exponent - 3
    return f"{sign}{mantissa}{_DECIMAL_SUFFIX[exponent]}"


def canonical(text: str | int) -> str:
    """The form the apiserver stores ``text`` in: ``canonical("1.5Gi") == "1536Mi"``."""
    amount, fmt = parse(text)
    return format_value(amount, fmt)
