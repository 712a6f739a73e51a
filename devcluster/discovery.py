"""Discovery documents: /version, /api, /api/v1, /apis, /apis/<group>, /apis/<group>/<version>.

Only the legacy (unaggregated) format is served. kubectl asks for aggregated discovery first
and falls back to these documents when the answer is plain JSON, as it does against older
servers. The version is 1.32 because the kubectl installed here picks its own version from
the server's minor version.
"""

from __future__ import annotations

import re
from typing import Any

from devcluster.catalog import Catalog

Obj = dict[str, Any]
VERSION: Obj = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0",
    "gitCommit": "kai-ray-devcluster",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
_KUBE_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key putting the preferred version first: GA, then beta, then alpha, newest first."""
    match = _KUBE_VERSION.match(version)
    if not match:
        return (3, 0, 0, version)
    stage = {None: 0, "beta": 1, "alpha": 2}[match[2]]
    return (stage, -int(match[1]), -int(match[3] or 0), version)


def api_versions(host: str) -> Obj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
    }


def _group(name: str, versions: list[str]) -> Obj:
    ordered = sorted(versions, key=version_priority)
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in ordered]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def group_list(catalog: Catalog) -> Obj:
    groups = [_group(name, versions) for name, versions in sorted(catalog.group_versions().items())]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def group(catalog: Catalog, name: str) -> Obj | None:
    versions = catalog.group_versions().get(name)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


def resource_list(catalog: Catalog, group_name: str, version: str) -> Obj | None:
    types = catalog.in_group_version(group_name, version)
    if not types:
        return None
    resources = [entry for rt in sorted(types, key=lambda t: t.plural) for entry in rt.discovery_entries()]
    group_version = f"{group_name}/{version}" if group_name else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}
