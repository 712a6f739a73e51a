"""Just enough OpenAPI for kubectl's default ``--validate=strict``: v3, and v2 for Lists.

Before ``create``/``apply``/``replace``, kubectl downloads ``/openapi/v3`` and looks in the
group version's document for the object's kind with a ``fieldValidation`` query parameter on
its write operations. Finding it, kubectl leaves validation to the server and sends
``fieldValidation=Strict``; without any OpenAPI it refuses to send the object at all. The
documents therefore list each served resource's write paths with that parameter and no
schemas; the dev cluster accepts the parameter and does not check unknown fields.

A ``kind: List`` (what ``kubectl get -o json`` prints for several objects) is a different path:
kubectl knows that no server validates a List, so it checks each item itself against the
OpenAPI v2 models, which it downloads from ``/openapi/v2`` as protobuf. Without that endpoint
``kubectl create -f`` of a List fails. The v2 document here names no models, so kubectl skips
the client-side check of every item, as it does for a kind a real server has no schema for.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from devcluster.catalog import Catalog, ResourceType
from devcluster.discovery import VERSION

Obj = dict[str, Any]
_FIELD_VALIDATION = {
    "name": "fieldValidation",
    "in": "query",
    "schema": {"type": "string", "uniqueItems": True},
    "description": "how the server treats unknown or duplicate fields: Ignore, Warn or Strict",
}


def _prefix(rt: ResourceType) -> str:
    return f"api/{rt.version}" if not rt.group else f"apis/{rt.group}/{rt.version}"


def _by_group_version(catalog: Catalog) -> dict[str, list[ResourceType]]:
    out: dict[str, list[ResourceType]] = {}
    for rt in catalog.types():
        out.setdefault(_prefix(rt), []).append(rt)
    return out


def _hash(types: list[ResourceType]) -> str:
    names = sorted((rt.plural, rt.kind, rt.namespaced) for rt in types)
    return hashlib.sha256(orjson.dumps(names)).hexdigest()[:16].upper()


def index(catalog: Catalog) -> Obj:
    """``/openapi/v3``: where each group version's document lives (the hash lets kubectl cache it)."""
    return {
        "paths": {
            prefix: {"serverRelativeURL": f"/openapi/v3/{prefix}?hash={_hash(types)}"}
            for prefix, types in sorted(_by_group_version(catalog).items())
        }
    }


def document(catalog: Catalog, prefix: str) -> Obj | None:
    """``/openapi/v3/<prefix>``: the write operations of one group version, without schemas."""
    types = _by_group_version(catalog).get(prefix)
    if types is None:
        return None
    paths: Obj = {}
    for rt in types:
        if rt.plural == "bindings":
            continue
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}

        def operation(action: str, gvk: Obj = gvk) -> Obj:
            return {
                "parameters": [_FIELD_VALIDATION],
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
            }

        base = f"/{prefix}" + ("/namespaces/{namespace}" if rt.namespaced else "") + f"/{rt.plural}"
        paths[base] = {"post": operation("post")}
        paths[base + "/{name}"] = {"put": operation("put"), "patch": operation("patch")}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": {}},
    }


# kubectl asks with the "@" spelling; the answer's Content-Type uses "." (an "@" is no valid MIME token).
V2_PROTOBUF_ACCEPTED = (
    "com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "com.github.proto-openapi.spec.v2.v1.0+protobuf",
)
V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


def _pb_string(field: int, text: str) -> bytes:
    """A length-delimited protobuf field (wire type 2) holding ``text``."""
    data = text.encode()
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _pb_message(field: int, body: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(body)) + body


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def v2_document() -> Obj:
    """``/openapi/v2`` as JSON: a Swagger 2.0 document without paths or models."""
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": VERSION["gitVersion"]}, "paths": {}}


def v2_protobuf() -> bytes:
    """The same document in gnostic's ``openapi_v2.Document`` protobuf, which kubectl asks for.

    Fields: swagger = 1, info = 2 (title = 1, version = 2), paths = 8 (empty).
    """
    info = _pb_string(1, "Kubernetes") + _pb_string(2, str(VERSION["gitVersion"]))
    return _pb_string(1, "2.0") + _pb_message(2, info) + _pb_message(8, b"")
