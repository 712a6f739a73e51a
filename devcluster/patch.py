"""PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge patch.

Strategic merge patch is approximated without the Go type tables: lists under a handful of
well-known field names merge by their Kubernetes patch merge key (containers by ``name``,
conditions by ``type``...), ``finalizers`` merge as a set, every other list is replaced.
The directives kubectl sends (``$patch``, ``$retainKeys``, ``$setElementOrder/``,
``$deleteFromPrimitiveList/``) are honoured. All functions return new values and never
change their inputs, because stored objects are shared with watchers.
"""

from __future__ import annotations

import copy
from typing import Any

from devcluster.errors import ApiError, bad_request, unsupported_media_type

# Field name -> patch merge key, for the list fields of the kinds served here.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "ports": "containerPort",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "conditions": "type",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "resourceClaims": "name",
    "addresses": "type",
    "topologySpreadConstraints": "topologyKey",
}
SET_LISTS = frozenset({"finalizers"})  # lists of scalars with patchStrategy=merge
_DELETE = object()  # a map patch carrying ``$patch: delete``


def unprocessable(message: str) -> ApiError:
    return ApiError(422, "Invalid", message)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        raise bad_request("a strategic merge patch must be a JSON object")
    merged = _strategic_map(target if isinstance(target, dict) else {}, patch)
    return {} if merged is _DELETE else merged


def _strategic_map(target: dict[str, Any], patch: dict[str, Any]) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if not k.startswith("$")}
    result = dict(target)
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/"):
            orders[key.split("/", 1)[1]] = value if isinstance(value, list) else []
        elif key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            gone = set(map(repr, value or []))
            result[field] = [v for v in result.get(field) or [] if repr(v) not in gone]
        elif key.startswith("$"):
            continue
        elif value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            current = result.get(key)
            merged = _strategic_map(current if isinstance(current, dict) else {}, value)
            if merged is _DELETE:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _strategic_list(key, result.get(key), value)
        else:
            result[key] = value
    for field, order in orders.items():
        if isinstance(result.get(field), list):
            result[field] = _reorder(field, result[field], order)
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _strategic_list(field: str, current: Any, incoming: list[Any]) -> list[Any]:
    current_list = current if isinstance(current, list) else []
    if field in SET_LISTS:
        return current_list + [v for v in incoming if v not in current_list]
    key = MERGE_KEYS.get(field)
    if key is None or not all(isinstance(item, dict) for item in incoming):
        return copy.deepcopy(incoming)
    if any(item.get("$patch") == "replace" for item in incoming):
        return [copy.deepcopy(item) for item in incoming if "$patch" not in item]
    merged = [item for item in current_list if isinstance(item, dict)]
    positions = {item.get(key): i for i, item in enumerate(merged)}
    removed = set()
    for item in incoming:
        name = item.get(key)
        if item.get("$patch") == "delete":
            removed.add(name)
        elif name in positions:
            merged[positions[name]] = _strategic_map(merged[positions[name]], item)
        else:
            positions[name] = len(merged)
            merged.append(copy.deepcopy(item))
    return [item for item in merged if item.get(key) not in removed]


def _reorder(field: str, items: list[Any], order: list[Any]) -> list[Any]:
    key = MERGE_KEYS.get(field)

    def ident(item: Any) -> Any:
        return repr(item.get(key)) if key and isinstance(item, dict) else repr(item)

    wanted = [ident(o) for o in order]
    rank = {name: i for i, name in enumerate(wanted)}
    return sorted(items, key=lambda item: rank.get(ident(item), len(rank)))


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise unprocessable(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list[Any], token: str, adding: bool) -> int:
    if adding and token == "-":
        return len(container)
    if not token.isdigit():
        raise unprocessable(f"invalid array index {token!r}")
    index = int(token)
    if index > len(container) or (not adding and index == len(container)):
        raise unprocessable(f"array index {index} out of bounds")
    return index


def _walk(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(doc, dict):
            if part not in doc:
                raise unprocessable(f"doc is missing path: /{'/'.join(parts)}")
            doc = doc[part]
        elif isinstance(doc, list):
            doc = doc[_index(doc, part, False)]
        else:
            raise unprocessable(f"doc is missing path: /{'/'.join(parts)}")
    return doc


def _remove(doc: Any, parts: list[str]) -> Any:
    if not parts:
        raise unprocessable("cannot remove the whole document")
    parent = _walk(doc, parts[:-1])
    if isinstance(parent, dict):
        if parts[-1] not in parent:
            raise unprocessable(f"remove operation does not apply: doc is missing key: /{'/'.join(parts)}")
        return parent.pop(parts[-1])
    return parent.pop(_index(parent, parts[-1], False))


def _add(doc: Any, parts: list[str], value: Any, replace: bool = False) -> Any:
    if not parts:
        return value
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise unprocessable(f"replace operation does not apply: doc is missing key: /{'/'.join(parts)}")
        parent[last] = value
    elif isinstance(parent, list):
        index = _index(parent, last, not replace)
        if replace:
            parent[index] = value
        else:
            parent.insert(index, value)
    else:
        raise unprocessable(f"doc is missing path: /{'/'.join(parts)}")
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 on a deep copy of ``target``; any failing operation fails the whole patch."""
    if not isinstance(operations, list):
        raise bad_request("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or not isinstance(op.get("path"), str):
            raise unprocessable(f"invalid JSON patch operation: {op!r}")
        kind, parts = op.get("op"), _pointer(op["path"])
        if kind in ("add", "replace"):
            if "value" not in op:
                raise unprocessable(f"{kind} operation without a value at {op['path']}")
            doc = _add(doc, parts, copy.deepcopy(op["value"]), replace=kind == "replace")
        elif kind == "remove":
            _remove(doc, parts)
        elif kind in ("move", "copy"):
            source = _pointer(str(op.get("from", "")))
            value = _remove(doc, source) if kind == "move" else copy.deepcopy(_walk(doc, source))
            doc = _add(doc, parts, value)
        elif kind == "test":
            if _walk(doc, parts) != op.get("value"):
                raise unprocessable(f"testing value {op['path']} failed")
        else:
            raise unprocessable(f"unsupported JSON patch operation {kind!r}")
    return doc


PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)


def apply_patch(target: Any, body: Any, content_type: str, custom: bool) -> Any:
    """Patch ``target`` by the request's content type; custom resources refuse strategic merge, as upstream."""
    if content_type == "application/json-patch+json":
        return json_patch(target, body)
    if content_type == "application/strategic-merge-patch+json":
        if custom:
            raise unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json-patch+json, application/merge-patch+json, "
                "application/apply-patch+yaml"
            )
        return strategic_merge_patch(target, body)
    if content_type == "application/apply-patch+yaml":
        # Server-side apply without field ownership: the manifest is merged into the live object
        # (lists by merge key for built-in kinds, so defaulted fields survive a re-apply).
        if not isinstance(body, dict):
            raise bad_request("an apply patch must be an object")
        return merge_patch(target, body) if custom else strategic_merge_patch(target, body)
    if content_type == "application/merge-patch+json":
        if not isinstance(body, dict):
            raise bad_request("a merge patch must be a JSON object")
        return merge_patch(target, body)
    raise unsupported_media_type(
        f"unsupported patch content type {content_type!r}; use one of " + ", ".join(PATCH_TYPES)
    )
