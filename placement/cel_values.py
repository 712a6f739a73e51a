"""Kubernetes' CEL values and library functions for device selectors, in cel-python's types.

Capacities are quantities and version attributes are semvers; ``quantity("40Gi")`` and
``semver("1.2.3")`` with ``compareTo``, ``isGreaterThan``, ``isLessThan`` (and ``asInteger``,
``asApproximateFloat``, ``major``, ``minor``, ``patch``) are the functions selectors use.
Imported only when a selector is first compiled: ``celpy`` takes a tenth of a second to import,
which every CLI call and scheduler start would pay for clusters without DRA selectors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celpy import celtypes

from kai_ray.model import Device
from kai_ray.quantity import QuantityError, plain


class Quantity(celtypes.DoubleType):
    """A Kubernetes quantity in CEL (base units)."""


class SemVer(celtypes.StringType):
    """A semantic version in CEL; compared part by part."""

    def parts(self) -> tuple[int, int, int]:
        core = str(self).split("-", 1)[0].split("+", 1)[0]
        numbers = [int(p) if p.isdigit() else 0 for p in core.split(".")[:3]]
        return tuple(numbers + [0] * (3 - len(numbers)))  # type: ignore[return-value]


def _quantity(text: Any) -> Quantity:
    try:
        return Quantity(plain(str(text)))
    except QuantityError as exc:
        raise ValueError(f"bad quantity {text!r}") from exc


def _key(value: Any) -> Any:
    return value.parts() if isinstance(value, SemVer) else float(value)


def _compare(a: Any, b: Any) -> celtypes.IntType:
    left, right = _key(a), _key(b)
    return celtypes.IntType((left > right) - (left < right))


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "semver": lambda text: SemVer(str(text)),
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: celtypes.BoolType(_compare(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_compare(a, b) < 0),
    "asInteger": lambda q: celtypes.IntType(int(q)),
    "asApproximateFloat": lambda q: celtypes.DoubleType(float(q)),
    "major": lambda v: celtypes.IntType(v.parts()[0]),
    "minor": lambda v: celtypes.IntType(v.parts()[1]),
    "patch": lambda v: celtypes.IntType(v.parts()[2]),
}


def _cel_value(value: bool | int | str | float) -> Any:
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, float):
        return Quantity(value)
    if value.startswith("v:"):
        return SemVer(value[2:])
    return celtypes.StringType(value)


def device_activation(device: Device) -> dict[str, Any]:
    attributes: dict[Any, Any] = {}
    for domain, name, value in device.attributes:
        attributes.setdefault(celtypes.StringType(domain), {})[celtypes.StringType(name)] = _cel_value(value)
    capacity: dict[Any, Any] = {}
    for domain, name, amount in device.capacity:
        capacity.setdefault(celtypes.StringType(domain), {})[celtypes.StringType(name)] = Quantity(amount)
    return {
        "device": celtypes.MapType(
            {
                celtypes.StringType("driver"): celtypes.StringType(device.driver),
                celtypes.StringType("attributes"): celtypes.MapType(
                    {k: celtypes.MapType(v) for k, v in attributes.items()}
                ),
                celtypes.StringType("capacity"): celtypes.MapType(
                    {k: celtypes.MapType(v) for k, v in capacity.items()}
                ),
            }
        )
    }
