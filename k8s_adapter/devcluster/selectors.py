"""Label and field selectors as the API server reads them (?labelSelector=, ?fieldSelector=)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Matcher = Callable[[dict[str, Any]], bool]
_SET = re.compile(r"^\s*(!?)([\w./-]+)\s*(?:(in|notin)\s*\(([^)]*)\))?\s*$")


class SelectorError(ValueError):
    pass


def _split(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def label_matcher(text: str | None) -> Matcher:
    if not text:
        return lambda obj: True
    tests: list[Callable[[dict[str, str]], bool]] = []
    for term in _split(text):
        if "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            tests.append(_label_test(key, {value}, inside=False))
        elif "==" in term or ("=" in term and not re.search(r"\s(in|notin)\s*\(", term)):
            key, value = (s.strip() for s in re.split("==?", term, maxsplit=1))
            tests.append(_label_test(key, {value}, inside=True))
        else:
            match = _SET.match(term)
            if not match:
                raise SelectorError(f"unable to parse requirement: {term!r}")
            negate, key, op, values = match.groups()
            if op is None:
                tests.append(_absent(key) if negate else _present(key))
            else:
                allowed = {v.strip() for v in values.split(",") if v.strip()}
                tests.append(_label_test(key, allowed, inside=op == "in"))
    return lambda obj: all(test((obj.get("metadata") or {}).get("labels") or {}) for test in tests)


def _label_test(key: str, allowed: set[str], inside: bool) -> Callable[[dict[str, str]], bool]:
    def test(labels: dict[str, str]) -> bool:
        return (labels.get(key) in allowed) == inside

    return test


def _absent(key: str) -> Callable[[dict[str, str]], bool]:
    return lambda labels: key not in labels


def _present(key: str) -> Callable[[dict[str, str]], bool]:
    return lambda labels: key in labels


def _field_test(path: str, value: str, equal: bool) -> Matcher:
    def test(obj: dict[str, Any]) -> bool:
        return (_field(obj, path) == value) == equal

    return test


def _field(obj: dict[str, Any], path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, dict):
            return ""
        node = node.get(part)
    return "" if node is None else str(node)


def field_matcher(text: str | None) -> Matcher:
    if not text:
        return lambda obj: True
    tests: list[Matcher] = []
    for term in _split(text):
        if "!=" in term:
            path, value = (s.strip() for s in term.split("!=", 1))
            tests.append(_field_test(path, value, equal=False))
        elif "=" in term:
            path, value = (s.strip() for s in re.split("==?", term, maxsplit=1))
            tests.append(_field_test(path, value, equal=True))
        else:
            raise SelectorError(f"invalid field selector: {term!r}")
    return lambda obj: all(test(obj) for test in tests)
