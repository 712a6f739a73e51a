"""Printing results: JSON for machines, aligned tables for people."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

import orjson

from kai_ray.config import SchedulerConfig


def clean_number(value: float) -> float | int:
    """Whole numbers print without a fraction; float noise below 1e-9 is rounded away."""
    rounded = round(value, 9)
    return int(rounded) if rounded == int(rounded) and abs(rounded) < 2**53 else rounded


def print_json(document: Any) -> None:
    """Indented JSON on stdout. orjson writes a decision list of thousands of pods in a fraction
    of the time the json module's indenting encoder takes (which writes piece by piece); what it
    cannot write (integers beyond 64 bits, NaN) goes through the json module."""
    try:
        text = orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        text = (json.dumps(document, indent=2) + "\n").encode()
    binary = getattr(sys.stdout, "buffer", None)
    if binary is None:  # a text-only stream (redirected into a StringIO)
        sys.stdout.write(text.decode())
        return
    sys.stdout.flush()
    binary.write(text)
    binary.flush()


def warn(message: str) -> None:
    print(f"kai-ray: warning: {message}", file=sys.stderr)


# A warning that more objects than this share the same words for is said once, naming a few.
SHARED_WARNING_LINES = 5
NAMED_IN_SHARED_WARNING = 3


def warn_each(messages: Sequence[str]) -> None:
    """Every warning, in order; those of the form "<Kind> <name>: <words>" that many objects of
    one kind share are one line with the count and the first few names (500 PodGroups naming a
    missing PriorityClass should not bury the one warning that differs)."""
    shared: dict[tuple[str, str], list[str]] = {}
    for message in messages:
        subject, _, words = message.partition(": ")
        kind, _, name = subject.partition(" ")
        if words and name and " " not in name:
            shared.setdefault((kind, words), []).append(name)
    said: set[tuple[str, str]] = set()
    for message in messages:
        subject, _, words = message.partition(": ")
        key = (subject.partition(" ")[0], words)
        names = shared.get(key, [])
        if len(names) <= SHARED_WARNING_LINES:
            warn(message)
        elif key not in said:
            said.add(key)
            first = ", ".join(names[:NAMED_IN_SHARED_WARNING])
            warn(f"{len(names)} {key[0]}s ({first} and {len(names) - NAMED_IN_SHARED_WARNING} more): {words}")


def warn_about(config: SchedulerConfig) -> None:
    """What the config asks that kai-ray does not do (plugins it cannot turn off, arguments it
    reads elsewhere): said once, at start, never dropped silently."""
    for message in config.resolved_plugins.warnings:
        warn(f"config: {message}")


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        value = clean_number(value)
        return f"{value:g}" if isinstance(value, float) else str(value)
    return "-" if value is None else str(value)


def human_quantity(resource: str, value: float) -> str:
    """gpu as devices, cpu as cores, memory in GB, for text output."""
    if resource == "cpu":
        return f"{value / 1000:g}"
    if resource == "memory":
        return f"{value / 1e9:.3g}G" if value else "0"
    return f"{clean_number(value):g}"
