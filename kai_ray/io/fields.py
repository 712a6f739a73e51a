"""Typed reads from Kubernetes objects that fail with the object and field named."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kai_ray.errors import InputError
from kai_ray.quantity import QuantityError, cpu_millis, finite, plain

# The parsers ask for a few dozen fixed paths, once per object each: split once.
_PATHS: dict[str, tuple[str, ...]] = {}
_MAX_PATHS = 1024


def read_number(value: Any, where: str) -> float:
    """A plain number (int or float, or text of one), finite; every reader's numbers come here."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InputError(f"{where}: not a number: {value!r}")
    try:
        return finite(float(value))
    except (ValueError, OverflowError):  # an integer too large for a float overflows
        raise InputError(f"{where}: not a finite number: {value!r}") from None


class ObjectReader:
    """Reads fields of one manifest; every failure names ``Kind ns/name: path``."""

    def __init__(self, doc: Mapping[str, Any], index: int) -> None:
        self.doc = doc
        self.kind = str(doc.get("kind", "?"))
        meta = doc.get("metadata")
        if not (type(meta) is dict or isinstance(meta, Mapping)):
            raise InputError(f"{self.kind} (document {index}): metadata: missing or not a mapping")
        self.meta: Mapping[str, Any] = meta
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise InputError(f"{self.kind} (document {index}): metadata.name: missing")
        self.name = name
        namespace = meta.get("namespace")
        self.namespace = namespace if isinstance(namespace, str) and namespace else "default"

    def ident(self, namespaced: bool = True) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if namespaced else f"{self.kind} {self.name}"

    def fail(self, path: str, problem: str, namespaced: bool = True) -> InputError:
        return InputError(f"{self.ident(namespaced)}: {path}: {problem}")

    def get(self, path: str, default: Any = None) -> Any:
        """The value at a dotted path ('spec.resources.gpu'), or ``default``."""
        node: Any = self.doc
        parts = _PATHS.get(path)
        if parts is None:
            parts = tuple(path.split("."))
            if len(_PATHS) < _MAX_PATHS:
                _PATHS[path] = parts
        for part in parts:
            # Decoded manifests are dicts: the type test spares the slower ABC check.
            if not (type(node) is dict or isinstance(node, Mapping)) or part not in node:
                return default
            node = node[part]
        return default if node is None else node

    def mapping(self, path: str, namespaced: bool = True) -> Mapping[str, Any]:
        value = self.get(path, {})
        if not isinstance(value, Mapping):
            raise self.fail(path, "must be a mapping", namespaced)
        return value

    def sequence(self, path: str, namespaced: bool = True) -> list[Any]:
        value = self.get(path, [])
        if not isinstance(value, list):
            raise self.fail(path, "must be a list", namespaced)
        return value

    def string_map(self, path: str, namespaced: bool = True) -> dict[str, str]:
        return text_map(self.mapping(path, namespaced))

    def number(self, path: str, default: float, namespaced: bool = True) -> float:
        value = self.get(path)
        if value is None:
            return default
        return read_number(value, f"{self.ident(namespaced)}: {path}")

    def integer(self, path: str, default: int, namespaced: bool = True) -> int:
        number = self.number(path, float(default), namespaced)
        if not number.is_integer():
            raise self.fail(path, f"not an integer: {number!r}", namespaced)
        return int(number)

    def quantity(self, path: str, value: Any, resource: str, namespaced: bool = True) -> float:
        """A resource quantity in scheduler units; negative amounts are refused."""
        try:
            amount = cpu_millis(value) if resource == "cpu" else plain(value)
        except QuantityError as exc:
            problem = f"bad quantity {value!r}" if str(exc).startswith("not a quantity") else str(exc)
            raise self.fail(path, problem, namespaced) from None
        if amount < 0:
            raise self.fail(path, f"negative quantity {value!r}", namespaced)
        return amount

    def timestamp(self, path: str, value: Any, namespaced: bool = True) -> float | None:
        if value is None or value == "":
            return None
        try:
            return parse_time(value)
        except ValueError:
            raise self.fail(path, f"bad timestamp {value!r}", namespaced) from None


def dict_or_absent(value: Any) -> bool:
    """Whether a field is unset or a plain mapping, as decoded manifests have them (the readers
    of the common shapes take these; anything else is read with every check)."""
    return value is None or type(value) is dict


def text_map(values: Mapping[Any, Any] | None) -> dict[str, str]:
    """Labels, annotations, a node selector: every key and value as text, null as ""."""
    if not values:
        return {}
    return {str(k): "" if v is None else str(v) for k, v in values.items()}


def parse_time(value: Any) -> float:
    """RFC 3339 (or a datetime YAML already parsed) as epoch seconds."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    else:
        raise ValueError(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
