"""Frozen slotted records made and copied without their generated initializer.

A frozen dataclass sets each field through ``object.__setattr__`` (a frozen class refuses its
own ``__setattr__``), which on records of twenty-odd fields is most of what making one costs;
reading a 4,000-pod snapshot makes a pod, a raw PodGroup and a PodGroup per job, and every bind
copies a pod. The functions here are written once per record type (and, for a copy, per set of
changed fields) and set each slot through the slot's own setter: the same record, in about a
third of the time. They are for records without ``__post_init__`` (whose initializer only stores
its arguments); ``fast_init`` refuses any other.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


def fast_init(kind: Callable[P, T]) -> Callable[P, T]:
    """A function that makes a ``kind`` record from the same arguments as the class (in field
    order or by name; defaults and default factories as the class has them)."""
    if not (isinstance(kind, type) and dataclasses.is_dataclass(kind) and "__slots__" in vars(kind)):
        raise TypeError(f"{kind!r} is not a slotted dataclass")
    if hasattr(kind, "__post_init__"):
        raise TypeError(f"{kind.__name__} has a __post_init__: its initializer does more than store fields")
    fields = dataclasses.fields(kind)
    if any(field.kw_only for field in fields):
        raise TypeError(f"{kind.__name__} has keyword-only fields")
    if any(_RESERVED.fullmatch(field.name) for field in fields):
        raise TypeError(f"{kind.__name__} has a field named like the written function's own names")
    values: dict[str, Any] = {}
    parameters, lines, stored = [], [], []
    for i, field in enumerate(fields):
        value = None
        if field.default is not dataclasses.MISSING:
            values[f"_default_{i}"] = field.default
            value = f"_default_{i}"
        elif field.default_factory is not dataclasses.MISSING:
            values[f"_factory_{i}"] = field.default_factory
            value = f"_factory_{i}()"
        if not field.init:  # set as the class's initializer sets it (or left unset, as there)
            if value is not None:
                lines.append(f"    {field.name} = {value}")
                stored.append((i, field.name))
            continue
        if value is None:
            parameters.append(field.name)
        elif field.default is not dataclasses.MISSING:
            parameters.append(f"{field.name}={value}")
        else:
            parameters.append(f"{field.name}=_unset")
            lines.append(f"    if {field.name} is _unset: {field.name} = {value}")
        stored.append((i, field.name))
    namespace = _namespace(kind, [f.name for f in fields])
    namespace.update(values, _unset=_UNSET)
    text = [
        f"def make({', '.join(parameters)}):",
        *lines,
        "    _made = _new(_kind)",
        *(f"    _set_{i}(_made, {name})" for i, name in stored),
        "    return _made",
    ]
    exec("\n".join(text), namespace)  # noqa: S102 - the text is made of the record's own field names
    return namespace["make"]  # type: ignore[no-any-return]


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


_UNSET = object()  # a default-factory field not given
# The names the written functions use besides the fields (``fast_init`` refuses a record whose
# fields would shadow them).
_RESERVED = re.compile(r"_new|_kind|_unset|_made|_(set|default|factory)_\d+")
_COPIERS: dict[tuple[type, tuple[str, ...]], Callable[..., Any]] = {}
