"""Reading manifests: YAML or JSON, one object, a multi-document stream or a List."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from kai_ray.errors import InputError

# The C loader is several times faster on big snapshots; PyYAML may be built without it.
_Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_text(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None


def parse_documents(text: str, source: str) -> list[Any]:
    """Every document in the text (JSON is tried first because it is faster)."""
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            pass  # may still be YAML flow style
        else:
            return value if isinstance(value, list) else [value]
    try:
        return [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{source}:{where}: invalid YAML/JSON: {problem}") from None


def iter_objects(documents: list[Any], source: str) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """Flatten Lists (``kind: List`` or ``*List``) into their items, with a running index."""
    index = 0
    for doc in documents:
        if not isinstance(doc, Mapping):
            raise InputError(f"{source}: document {index}: expected a Kubernetes object, got {type(doc).__name__}")
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and "items" in doc:
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise InputError(f"{source}: {kind}: items: must be a list")
            for item in items:
                if not isinstance(item, Mapping):
                    raise InputError(f"{source}: {kind} item {index}: expected a Kubernetes object")
                yield index, item
                index += 1
        else:
            yield index, doc
            index += 1
