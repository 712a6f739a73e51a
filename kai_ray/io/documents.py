"""Reading manifests: YAML or JSON, one object, a multi-document stream or a List."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import yaml

from kai_ray.errors import InputError
from kai_ray.io.block_yaml import read_block_yaml

# The C loader is several times faster on big snapshots; PyYAML may be built without it.
_Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Kubernetes objects nest a few dozen levels at most. Deeper input is refused before it is
# loaded: YAML's C composer recurses on the C stack (a 100,000-deep list crashes the process)
# and json recurses until RecursionError. Every reader goes through parse_documents (or
# read_documents, which reads plain JSON itself only below a much smaller bound), so this is the
# one place the limit lives.
MAX_DEPTH = 200
_BRACKETS = np.zeros(256, dtype=np.int32)
_BRACKETS[[ord("["), ord("{")]] = 1
_BRACKETS[[ord("]"), ord("}")]] = -1
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
# Cheap bounds that together keep a document under MAX_DEPTH: flow brackets open at once,
# block indentation (two levels per column at most: a sequence may sit at its key's column),
# and compact "- - -" entries on one line. Only input beyond them is measured exactly.
_FLOW_BOUND = 60
_DEEP_INDENT = " " * 64
_COMPACT_DASHES = re.compile(r"^[ ]*(?:-[ ]+){10}", re.MULTILINE)
# Two dashes with only spaces between them: a line of compact dashes has them. A pattern that
# starts with a plain character is searched for quickly; one that starts with "^" in multi-line
# mode is tried at every position (most of a second on a 20 MB snapshot), so it only runs
# when this finds something.
_DASH_PAIR = re.compile(r"-[ ]+-")
_CHUNK = 1 << 23
_STARTS_JSON = re.compile(rb"[ \t\r\n]*[\[{]")


def read_text(path: str | Path) -> str:
    return _decoded(_read_bytes(path), path)


def read_documents(path: str | Path) -> list[Any]:
    """Every document in a file, as ``parse_documents`` reads its text. A file of plain JSON is
    read straight from its bytes: no text decoded, and no check meant for block YAML made (on a
    20 MB snapshot the two took as long as the JSON parser itself)."""
    raw = _read_bytes(path)
    documents = _plain_json(raw)
    return documents if documents is not None else parse_documents(_decoded(raw, path), str(path))


def _read_bytes(path: str | Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _decoded(raw: bytes, path: str | Path) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None


def _plain_json(raw: bytes) -> list[Any] | None:
    """The documents of ``raw`` when it is JSON orjson reads whose brackets never nest past the
    cheap bound (so it is well within MAX_DEPTH); None for anything else, which
    ``parse_documents`` then reads and judges as it reads any text (invalid UTF-8 included:
    orjson refuses it)."""
    if _STARTS_JSON.match(raw) is None or _open_brackets(raw) > _FLOW_BOUND:
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, list) else [value]


def _open_brackets(utf8: bytes) -> int:
    """The most brackets open at any point of UTF-8 text (an over-estimate: brackets in strings
    count too)."""
    data = np.frombuffer(utf8.translate(None, _NOT_BRACKETS), dtype=np.uint8)
    deepest, level = 0, 0
    for start in range(0, len(data), _CHUNK):
        running = np.cumsum(_BRACKETS[data[start : start + _CHUNK]]) + level
        deepest, level = max(deepest, int(running.max())), int(running[-1])
    return deepest


def _exact_depth(text: str) -> int:
    """How deep the documents really nest, from the parser's events (no recursion).

    The C parser is tried first because it is fast. It may refuse deep input itself, and it may
    do so before yielding a single event (libyaml's scanner looks ahead and has a nesting limit
    of its own in newer builds), so when it fails the pure-Python parser, which keeps its state
    on a list and has no such limit, measures again: kai-ray's limit and message stay the same
    whichever PyYAML is installed."""
    try:
        return _deepest_event(text, _Loader)
    except yaml.YAMLError:
        pass
    try:
        return _deepest_event(text, yaml.SafeLoader)
    except yaml.YAMLError:
        return 0  # not too deep as far as it parses: the load reports the syntax error with its position


def _deepest_event(text: str, loader: type) -> int:
    depth = deepest = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                break
        elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            depth -= 1
    return deepest


def _deeply_indented(text: str) -> bool:
    return text.startswith(_DEEP_INDENT) or "\n" + _DEEP_INDENT in text


def _compact_dashes(text: str) -> bool:
    return _DASH_PAIR.search(text) is not None and _COMPACT_DASHES.search(text) is not None


def check_depth(text: str, source: str) -> None:
    """Refuse documents nested deeper than MAX_DEPTH, in one line, before anything recurses."""
    if (
        _open_brackets(text.encode("utf-8", "surrogatepass")) <= _FLOW_BOUND
        and not _deeply_indented(text)
        and not _compact_dashes(text)
    ):
        return
    if _exact_depth(text) > MAX_DEPTH:
        raise InputError(f"{source}: nested deeper than {MAX_DEPTH} levels")


def _json(text: str) -> Any:
    """orjson where it reads the text (several times faster), the standard library where it does
    not (NaN, Infinity, numbers beyond a double). orjson reads an integer beyond 64 bits as a
    float; every numeric field is read as a float anyway (``fields.read_number``)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def parse_documents(text: str, source: str) -> list[Any]:
    """Every document in the text (JSON is tried first because it is faster, then the reader of
    plain block YAML, then PyYAML for everything else)."""
    check_depth(text, source)
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            value = _json(text)
        except json.JSONDecodeError:
            pass  # may still be YAML flow style
        except RecursionError:
            raise InputError(f"{source}: nested deeper than {MAX_DEPTH} levels") from None
        else:
            return value if isinstance(value, list) else [value]
    block = read_block_yaml(text)
    if block is not None:
        return block
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
