"""Frozen slotted records made and copied without their generated initializer.

A frozen dataclass sets each field through ``object.__setattr__`` (a frozen class refuses its
own ``__setattr__``), which on records of twenty-odd fields is most of what making one costs;
every bind copies a pod. The copy is written once per record type and set of changed fields
and sets each slot through the slot's own setter: the same record, in about a third of the time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def with_changes(record: T, **changes: object) -> T:
    """``dataclasses.replace`` for a frozen slotted record, without re-running its initializer:
    a bound pod (and its pod group's start time) is copied once per bind, thousands of times a
    cycle. The copy reads each kept field and writes each slot through the slot's own setter (a
    loop over the fields looked the setters up and boxed the values, twice as slow)."""
    kind = type(record)
    names = tuple(changes)
    copier = _COPIERS.get((kind, names))
    if copier is None:
        copier = _COPIERS[kind, names] = _copier(kind, names)
    return copier(record, *changes.values())  # type: ignore[no-any-return]


def _copier(kind: type, changed: tuple[str, ...]) -> Callable[..., Any]:
    fields = tuple(kind.__dataclass_fields__)  # type: ignore[attr-defined]
    unknown = set(changed) - set(fields)
    if unknown:
        raise TypeError(f"{kind.__name__} has no field {sorted(unknown)[0]!r}")
    arguments = {name: f"_new_{i}" for i, name in enumerate(changed)}
    lines = [
        f"def copy(record, {', '.join(arguments.values())}):" if changed else "def copy(record):",
        "    copy = _new(_kind)",
        *(f"    _set_{i}(copy, {arguments.get(name, f'record.{name}')})" for i, name in enumerate(fields)),
        "    return copy",
    ]
    namespace = _namespace(kind, list(fields))
    exec("\n".join(lines), namespace)  # noqa: S102 - the text is made of the record's own field names
    return namespace["copy"]  # type: ignore[no-any-return]


def _namespace(kind: type, fields: list[str]) -> dict[str, Any]:
    """What the written functions read: the class, ``object.__new__`` and each slot's setter
    (``_set_<position>``)."""
    setters = {f"_set_{i}": getattr(kind, name).__set__ for i, name in enumerate(fields)}
    return {"_new": object.__new__, "_kind": kind, **setters}


_COPIERS: dict[tuple[type, tuple[str, ...]], Callable[..., Any]] = {}
