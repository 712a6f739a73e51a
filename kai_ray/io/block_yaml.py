"""A fast reader for the plain block style in which tools write manifests.

PyYAML's C loader parses in C but still builds every event, node and mark and resolves every
scalar in Python: a snapshot of a few thousand pods took it seconds, far longer than scheduling
them. ``kubectl get -o yaml`` and PyYAML's dumper write a small part of YAML: block mappings and
sequences (indentless ones included), plain and quoted scalars on one line (long plain and
single-quoted ones folded over the next lines), ``{}`` and ``[]``, literal block scalars (``|``,
``|-``) and whole-line comments. This reader takes exactly that part, line by line, and gives up
(None) on anything else: anchors, tags, flow collections, comments after a value, escapes in
double quotes, tabs, a structure it does not expect. The caller then loads the text with PyYAML,
so unusual input is read, or refused with PyYAML's message, as it always was.

Scalars are typed by PyYAML's own resolver and constructors, so ``yes``, ``0o17``, ``1:30`` or
``2024-01-01`` mean here what they mean to PyYAML; the documents read are equal to PyYAML's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

__all__ = ["read_block_yaml"]


class _Unsupported(Exception):
    """The text uses YAML outside what this reader takes: PyYAML reads it instead."""


# Characters PyYAML refuses or treats specially (tabs, other line breaks, a byte-order mark,
# control characters, lone surrogates): a text with any of them goes to PyYAML whole.
_OUTSIDE = re.compile("[^\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")
_PRINTABLE_ASCII = bytes(range(0x20, 0x7F)) + b"\n"
# A plain scalar may not start with these (a leading "-" is fine when no space follows).
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")
_TYPED_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in ("null", "bool", "int", "float", "timestamp", "str"))
_STR_TAG = "tag:yaml.org,2002:str"
_UNSEEN = object()
_MAX_KEY = 1000  # a little under PyYAML's limit on a simple key (1024 characters)
# Scalars repeat across objects ("Pending", "v1", "true", '1'): each is read once, and kept as
# written on its line, quotes and all (a plain scalar never starts with a quote, so the two
# kinds cannot be confused).
_KNOWN: dict[str, Any] = {}
_MAX_KNOWN = 1 << 16
# PyYAML's own typing of plain scalars (the loaders' resolver), bound once.
_resolve_tag: Callable[[type, str, tuple[bool, bool]], str] = Resolver().resolve
_CONSTRUCTOR = SafeConstructor()


def read_block_yaml(text: str) -> list[Any] | None:
    """The documents of ``text`` (empty ones left out), or None when it is not plain block YAML."""
    if _has_outside_characters(text) or Resolver.yaml_path_resolvers:
        return None
    try:
        return _BlockReader(text).documents()
    except (_Unsupported, RecursionError):
        return None


def _has_outside_characters(text: str) -> bool:
    if text.isascii():  # the common case, checked several times faster than by the pattern
        return bool(text.encode("ascii").translate(None, _PRINTABLE_ASCII))
    return _OUTSIDE.search(text) is not None


def _is_entry(content: str) -> bool:
    """A sequence entry: "-" alone or followed by a space (content is never empty)."""
    return content[0] == "-" and (len(content) == 1 or content[1] == " ")


def _plain(text: str) -> Any:
    """A plain scalar, typed as PyYAML types it."""
    try:
        return _KNOWN[text]
    except KeyError:
        pass
    first = text[0]
    if first in _INDICATORS and not (first == "-" and len(text) > 1 and text[1] != " "):
        raise _Unsupported
    if ": " in text or " #" in text or text[-1] == ":":
        raise _Unsupported
    tag = _resolve_tag(yaml.ScalarNode, text, (True, False))
    if tag == _STR_TAG:
        value: Any = text
    else:
        construct = SafeConstructor.yaml_constructors.get(tag)
        if tag not in _TYPED_TAGS or construct is None:
            raise _Unsupported  # a merge key, "=", or a tag someone taught PyYAML
        value = construct(_CONSTRUCTOR, yaml.ScalarNode(tag, text))
    return _remember(text, value)


def _remember(written: str, value: Any) -> Any:
    """Keep a one-line scalar as written (plain, or quoted with its quotes) with its value."""
    if len(_KNOWN) >= _MAX_KNOWN:
        _KNOWN.clear()
    _KNOWN[written] = value
    return value


def _single_quote_end(text: str, start: int) -> int:
    """Where the single-quoted scalar that continues at ``start`` closes on this line, or -1."""
    while True:
        quote = text.find("'", start)
        if quote < 0 or text[quote + 1 : quote + 2] != "'":
            return quote
        start = quote + 2


def _quoted_on_line(text: str) -> tuple[str, str]:
    """A quoted scalar that opens and closes on this line, and what follows it."""
    if text[0] == "'":
        close = _single_quote_end(text, 1)
        if close < 0:
            raise _Unsupported
        return text[1:close].replace("''", "'"), text[close + 1 :]
    close = text.find('"', 1)
    if close < 0 or "\\" in text[1:close]:
        raise _Unsupported
    return text[1:close], text[close + 1 :]


def _is_key(content: str) -> bool:
    """Whether a line (or what follows "- ") starts a mapping entry."""
    if content[0] in "'\"":
        try:
            _, after = _quoted_on_line(content)
        except _Unsupported:
            return False
        return after == ":" or after.startswith(": ")
    return ": " in content or content[-1] == ":"


class _BlockReader:
    """One text, as lines: ``indents`` and ``contents`` (stripped; "" for a blank or comment
    line), with document markers at indent -1 so that every open block ends at them."""

    def __init__(self, text: str) -> None:
        raw = text.split("\n")
        stripped = [line.lstrip(" ") for line in raw]
        self.raw = raw
        self.indents = [len(line) - len(rest) for line, rest in zip(raw, stripped, strict=True)]
        contents = [rest.rstrip(" ") for rest in stripped]
        if "#" in text:
            contents = ["" if content[:1] == "#" else content for content in contents]
        self.contents = contents
        self.end = len(raw)
        if "\n---" in text or "\n..." in text or "\n%" in text or text.startswith(("---", "...", "%")):
            self._mark_documents()

    def _mark_documents(self) -> None:
        for i, line in enumerate(self.raw):
            if line.startswith(("---", "...", "%")):
                if self.contents[i] != "---":
                    raise _Unsupported  # a directive, "...", or content after "---"
                self.indents[i] = -1

    def _skip_blank(self, i: int) -> int:
        contents, end = self.contents, self.end
        while i < end and not contents[i]:
            i += 1
        return i

    def documents(self) -> list[Any]:
        found: list[Any] = []
        i = self._skip_blank(0)
        while i < self.end:
            if self.indents[i] < 0:
                i = self._skip_blank(i + 1)
                continue
            value, i = self._block(i)
            i = self._skip_blank(i)
            if i < self.end and self.indents[i] >= 0:
                raise _Unsupported  # a line outside the document's root block
            found.append(value)
        return found

    def _block(self, i: int) -> tuple[Any, int]:
        """The mapping or sequence whose first line is ``i``."""
        if _is_entry(self.contents[i]):
            return self._sequence(i, self.indents[i])
        return self._mapping(i, self.indents[i])

    def _mapping(self, i: int, indent: int) -> tuple[dict[Any, Any], int]:
        indents, contents, end = self.indents, self.contents, self.end
        known = _KNOWN
        out: dict[Any, Any] = {}
        while True:
            content = contents[i]
            # Most lines are "key: value" or "key:" with a key, and a one-line value, seen
            # before: they are read here; everything else takes the general way.
            colon = content.find(": ")
            key = value = _UNSEEN
            if 0 < colon <= _MAX_KEY:
                key = known.get(content[:colon], _UNSEEN)
                if key is not _UNSEEN:
                    value = known.get(content[colon + 2 :], _UNSEEN)
            elif colon < 0 and content[-1] == ":" and len(content) <= _MAX_KEY:
                key = known.get(content[:-1], _UNSEEN)
            if value is not _UNSEEN and (i + 1 == end or indents[i + 1] <= indent or not contents[i + 1]):
                out[key] = value
                i += 1
                if i < end and indents[i] == indent and contents[i]:
                    continue
            elif key is not _UNSEEN and colon < 0:
                out[key], i = self._below_key(i + 1, indent)
            else:
                key, rest = self._key(content)
                if rest:
                    out[key], i = self._inline(rest, i, indent)
                else:
                    out[key], i = self._below_key(i + 1, indent)
            while i < end and not contents[i]:
                i += 1
            if i == end or indents[i] < indent:
                return out, i
            if indents[i] > indent:
                raise _Unsupported

    def _key(self, content: str) -> tuple[Any, str]:
        """A mapping entry's key and the rest of its line after ": " (or "")."""
        if content[0] in "'\"":
            key, after = _quoted_on_line(content)
            written = len(content) - len(after)
            if written > _MAX_KEY:
                raise _Unsupported
            _remember(content[:written], key)
            if after == ":":
                return key, ""
            if not after.startswith(": "):
                raise _Unsupported
            return key, after[2:].lstrip(" ")
        colon = content.find(": ")
        if colon < 0:
            if content[-1] != ":":
                raise _Unsupported  # a scalar where an entry was expected
            colon = len(content) - 1
        if not 0 < colon <= _MAX_KEY:
            raise _Unsupported
        return _plain(content[:colon].rstrip(" ")), content[colon + 2 :].lstrip(" ")

    def _below_key(self, i: int, indent: int) -> tuple[Any, int]:
        """The value of a key with nothing after its colon: the block below it, an indentless
        sequence at the key's own indent, or null."""
        i = self._skip_blank(i)
        if i == self.end or self.indents[i] < indent:
            return None, i
        if self.indents[i] == indent:
            if _is_entry(self.contents[i]):
                return self._sequence(i, indent)
            return None, i
        return self._block(i)

    def _sequence(self, i: int, indent: int) -> tuple[list[Any], int]:
        indents, contents, end = self.indents, self.contents, self.end
        out: list[Any] = []
        while True:
            content = contents[i]
            if len(content) == 1:  # "-" alone: the item is the block below, or null
                j = self._skip_blank(i + 1)
                if j == end or indents[j] <= indent:
                    value: Any = None
                    i = j
                else:
                    value, i = self._block(j)
            else:
                after_dash = content[2:]
                item = after_dash.lstrip(" ")
                column = indent + 2 + len(after_dash) - len(item)
                if _is_entry(item) or _is_key(item):
                    # A compact nested sequence or mapping: it is a block that starts at the
                    # item's column, on this line.
                    indents[i], contents[i] = column, item
                    value, i = self._block(i)
                else:
                    value, i = self._inline(item, i, indent)
            out.append(value)
            while i < end and not contents[i]:
                i += 1
            if i == end or indents[i] < indent:
                return out, i
            if indents[i] > indent:
                raise _Unsupported
            if not _is_entry(contents[i]):
                return out, i  # the mapping around an indentless sequence goes on

    def _inline(self, text: str, i: int, indent: int) -> tuple[Any, int]:
        """A scalar that starts on line ``i`` after a key or a dash, in a block at ``indent``."""
        first = text[0]
        if first == "'":
            return self._single_quoted(text, i, indent)
        if first == '"':
            value, after = _quoted_on_line(text)
            if after:
                raise _Unsupported
            return _remember(text, value), i + 1
        if first == "|":
            return self._literal(text, i, indent)
        if text == "{}":
            return {}, i + 1
        if text == "[]":
            return [], i + 1
        j = i + 1
        indents, contents = self.indents, self.contents
        if j < self.end and indents[j] > indent and contents[j]:
            return self._folded_plain(text, j, indent)
        return _plain(text), j

    def _folded_plain(self, text: str, j: int, indent: int) -> tuple[Any, int]:
        """A plain scalar that goes on over the more indented lines from ``j``: one space each."""
        parts = [text]
        indents, contents, end = self.indents, self.contents, self.end
        while j < end and indents[j] > indent and contents[j]:
            line = contents[j]
            if line[0] in _INDICATORS:
                raise _Unsupported
            parts.append(line)
            j += 1
        return _plain(" ".join(parts)), j

    def _single_quoted(self, text: str, i: int, indent: int) -> tuple[str, int]:
        parts: list[str] = []
        start = 1
        while True:
            close = _single_quote_end(text, start)
            if close >= 0:
                parts.append(text[start:close])
                if text[close + 1 :].strip(" "):
                    raise _Unsupported
                value = " ".join(parts).replace("''", "'")
                return (_remember(text, value) if start == 1 else value), i + 1
            # Folded onto the next line: the line break and the spaces around it are one space.
            parts.append(text[start:].rstrip(" "))
            i += 1
            if i == self.end or self.indents[i] <= indent:
                raise _Unsupported
            text = self.raw[i].strip(" ")
            if not text:
                raise _Unsupported  # an empty line would be a newline
            start = 0

    def _literal(self, header: str, i: int, indent: int) -> tuple[str, int]:
        """A literal block scalar: the lines below that are more indented than the block."""
        if header not in ("|", "|-"):
            raise _Unsupported  # folded, kept or explicitly indented
        raw, end = self.raw, self.end
        lines: list[str] = []
        column = -1
        last = -1  # the last line with content
        j = i + 1
        while j < end:
            line = raw[j]
            rest = line.lstrip(" ")
            if not rest:
                if len(line) > max(column, 0):
                    raise _Unsupported  # spaces that would be content, or that set the indent
                lines.append("")
                j += 1
                continue
            depth = len(line) - len(rest)
            if column < 0:
                if depth <= indent:
                    break
                column = depth
            elif depth < column:
                break
            lines.append(line[column:])
            last = j
            j += 1
        if last == end - 1:
            raise _Unsupported  # no line break after the last line: not worth the special case
        while lines and not lines[-1]:
            lines.pop()
        if not lines:
            return "", j
        return "\n".join(lines) + ("\n" if header == "|" else ""), j
