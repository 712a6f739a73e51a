"""PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902), and strategic merge.

Strategic merge patch is approximated as a merge patch that merges lists of objects by
their ``type`` (conditions) or ``name`` (containers) key, which is what schedulers and
kubectl send to the objects served here.
"""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    pass


def merge_patch(target: Any, patch: Any, strategic: bool = False) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif strategic and isinstance(value, list) and isinstance(result.get(key), list):
            result[key] = _merge_lists(result[key], value)
        else:
            result[key] = merge_patch(result.get(key), value, strategic)
    return result


def _merge_lists(current: list[Any], incoming: list[Any]) -> list[Any]:
    key = next((k for k in ("type", "name") if incoming and all(isinstance(i, dict) and k in i for i in incoming)),
               None)
    if key is None or not all(isinstance(i, dict) and key in i for i in current):
        return copy.deepcopy(incoming)
    merged = {item[key]: dict(item) for item in current}
    order = [item[key] for item in current]
    for item in incoming:
        if item[key] in merged:
            merged[item[key]] = merge_patch(merged[item[key]], item, True)
        else:
            merged[item[key]] = copy.deepcopy(item)
            order.append(item[key])
    return [merged[k] for k in order]


def json_patch(target: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise PatchError("a JSON patch is a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"bad operation: {op!r}")
        parts = [p.replace("~1", "/").replace("~0", "~") for p in str(op["path"]).split("/")[1:]]
        parent = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent.setdefault(part, {})
        last = parts[-1] if parts else ""
        kind = op["op"]
        if kind in ("add", "replace"):
            if isinstance(parent, list):
                index = len(parent) if last == "-" else int(last)
                if kind == "add":
                    parent.insert(index, op.get("value"))
                else:
                    parent[index] = op.get("value")
            else:
                if kind == "replace" and last not in parent:
                    raise PatchError(f"path {op['path']} does not exist")
                parent[last] = op.get("value")
        elif kind == "remove":
            if isinstance(parent, list):
                parent.pop(int(last))
            elif last in parent:
                del parent[last]
            else:
                raise PatchError(f"path {op['path']} does not exist")
        elif kind == "test":
            value = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if value != op.get("value"):
                raise PatchError(f"test failed at {op['path']}")
        else:
            raise PatchError(f"unsupported operation {kind!r}")
    return doc


def apply_patch(target: Any, body: Any, content_type: str) -> Any:
    if "json-patch" in content_type:
        return json_patch(target, body)
    if "strategic-merge-patch" in content_type:
        return merge_patch(target, body, strategic=True)
    return merge_patch(target, body)
