"""Kubernetes resource quantities ("500m", "16Gi", "1e3") as numbers.

Written here rather than imported from kubernetes-asyncio because importing that
client costs most of a second, and `kai-ray schedule` must start fast.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

_PATTERN = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?\d+))?$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
}


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity."""


def finite(value: float) -> float:
    """``value`` if it is an ordinary number. NaN and infinity (YAML's ``.nan``/``.inf``, or an
    amount too big for a float such as ``1e400``) mean nothing to a scheduler; every reader of
    numbers goes through here, so they are refused the same way wherever they appear."""
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    return value


def parse_quantity(value: object) -> Decimal:
    """The exact value of a quantity; plain ints and floats are accepted as they are."""
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise QuantityError(f"not a finite quantity: {value!r}")
        return Decimal(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"not a quantity: {value!r}")
    match = _PATTERN.match(value.strip())
    if not match:
        raise QuantityError(f"not a quantity: {value!r}")
    number, suffix, exponent = match.groups()
    try:
        amount = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
        raise QuantityError(f"not a quantity: {value!r}") from exc
    if suffix in _BINARY:
        return amount * _BINARY[suffix]
    if suffix:
        return amount * _DECIMAL[suffix]
    if exponent:
        return amount.scaleb(int(exponent))
    return amount


# Manifests repeat a handful of quantity texts ("1", "500m", "16Gi", "110") thousands of times;
# exact decimal arithmetic is the slow part, so each text is worked out once.
_CPU_MILLIS: dict[str, float] = {}
_PLAIN: dict[str, float] = {}
_MAX_REMEMBERED = 4096


def cpu_millis(value: object) -> float:
    """A CPU quantity in millicores ("2" -> 2000, "250m" -> 250)."""
    if type(value) is str:
        known = _CPU_MILLIS.get(value)
        if known is None:
            known = _remember(_CPU_MILLIS, value, _as_float(parse_quantity(value) * 1000, value))
        return known
    return _as_float(parse_quantity(value) * 1000, value)


def plain(value: object) -> float:
    """Any other quantity in its base unit (bytes for memory, a count for devices)."""
    if type(value) is str:
        known = _PLAIN.get(value)
        if known is None:
            known = _remember(_PLAIN, value, _as_float(parse_quantity(value), value))
        return known
    return _as_float(parse_quantity(value), value)


def _remember(table: dict[str, float], text: str, amount: float) -> float:
    if len(table) >= _MAX_REMEMBERED:
        table.clear()
    table[text] = amount
    return amount


def _as_float(amount: Decimal, value: object) -> float:
    try:
        return finite(float(amount))
    except ValueError:
        raise QuantityError(f"too large a quantity: {value!r}") from None


def parse_duration(text: Any) -> float:
    """A Go/Kubernetes duration ('60s', '1h30m', '500ms') in seconds."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return finite(float(text))
    if not isinstance(text, str) or not text:
        raise ValueError(text)
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    sign = -1.0 if text.startswith("-") else 1.0
    rest = text.lstrip("+-")
    total, number = 0.0, ""
    i = 0
    while i < len(rest):
        ch = rest[i]
        if ch.isdigit() or ch == ".":
            number += ch
            i += 1
            continue
        unit = next((u for u in ("ns", "us", "µs", "ms", "s", "m", "h") if rest.startswith(u, i)), None)
        if unit is None or not number:
            raise ValueError(text)
        total += float(number) * units[unit]
        number = ""
        i += len(unit)
    if number:
        if total == 0 and float(number) == 0:
            return 0.0
        raise ValueError(text)
    return finite(sign * total)
