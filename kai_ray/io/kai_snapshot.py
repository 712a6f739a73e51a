"""KAI's ``/get-snapshot`` ZIP as snapshot input: the cluster and the scheduler's configuration.

KAI's snapshot plugin serves a ZIP holding one ``snapshot.json``::

    {"config": {"actions": "allocate, ...", "tiers": [{"plugins": [{"name", "arguments"}]}], ...},
     "schedulerParams": {"schedulerName", "partitionParams", "maxNumberConsolidationPreemptees",
                         "useSchedulingSignatures", "allowConsolidatingReclaim",
                         "globalDefaultStalenessGracePeriod" (nanoseconds), ...},
     "rawObjects": {"pods": [...], "nodes": [...], "queues": [...], "podGroups": [...],
                    "bindRequests": [...], "priorityClasses": [...], "configMaps": [...], ...}}

The raw objects are what KAI's informers held, often without ``kind``/``apiVersion``; the
list they sit in says what they are. The configuration becomes kai-ray's (DESIGN.md 5.4)
as KAI would run it: the actions string, the node placement and GPU-device strategy from
the plugin list, ``kValue`` and the reclaimer saturation multiplier from ``proportion``,
the minimum runtimes from ``minruntime``, the rest from the scheduler parameters. Settings
kai-ray does not act on are named in warnings; a node-pool partition is applied here, as
KAI's informers apply it.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kai_ray.errors import InputError
from kai_ray.plugins import DEFAULT_PRIORITIES, ORDERED, SWITCHABLE, known

SNAPSHOT_FILE = "snapshot.json"
ZIP_MAGIC = b"PK\x03\x04"
UNLIMITED_PREEMPTEES = 1_000_000  # KAI's -1: no limit on consolidation victims

# rawObjects field -> (apiVersion, kind) of its objects
_KINDS = {
    "nodes": ("v1", "Node"),
    "pods": ("v1", "Pod"),
    "queues": ("scheduling.run.ai/v2", "Queue"),
    "podGroups": ("scheduling.run.ai/v2alpha2", "PodGroup"),
    "bindRequests": ("scheduling.run.ai/v1alpha2", "BindRequest"),
    "priorityClasses": ("scheduling.k8s.io/v1", "PriorityClass"),
}


@dataclass
class KaiSnapshot:
    documents: list[dict[str, Any]]
    config: dict[str, Any]  # kai-ray's config mapping
    warnings: list[str] = field(default_factory=list)


def is_kai_snapshot(path: str | Path) -> bool:
    try:
        with Path(path).open("rb") as file:
            return file.read(4) == ZIP_MAGIC
    except OSError:
        return False


def read_kai_snapshot(path: str | Path) -> KaiSnapshot:
    source = str(path)
    try:
        with zipfile.ZipFile(path) as archive:
            if SNAPSHOT_FILE not in archive.namelist():
                raise InputError(f"{source}: no {SNAPSHOT_FILE} in the ZIP (is it KAI's /get-snapshot?)")
            data = json.loads(archive.read(SNAPSHOT_FILE))
    except (OSError, zipfile.BadZipFile) as exc:
        raise InputError(f"{source}: cannot read the ZIP: {exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{source}: {SNAPSHOT_FILE}: not JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise InputError(f"{source}: {SNAPSHOT_FILE}: expected an object")
    warnings: list[str] = []
    params = _mapping(data.get("schedulerParams"), f"{source}: schedulerParams")
    documents = _documents(_mapping(data.get("rawObjects"), f"{source}: rawObjects"), source, warnings)
    documents = _partition(documents, _mapping(params.get("partitionParams"), "partitionParams"), warnings)
    config = config_from_kai(_mapping(data.get("config"), f"{source}: config"), params, warnings)
    return KaiSnapshot(documents, config, warnings)


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"{where}: expected an object")
    return value


def _documents(raw: Mapping[str, Any], source: str, warnings: list[str]) -> list[dict[str, Any]]:
    documents: list[dict[str, Any]] = []
    for name, items in raw.items():
        if not items:
            continue
        if not isinstance(items, list):
            raise InputError(f"{source}: rawObjects.{name}: expected a list")
        if name not in _KINDS:
            warnings.append(f"{source}: rawObjects.{name}: {len(items)} objects kai-ray does not use")
            continue
        api_version, kind = _KINDS[name]
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise InputError(f"{source}: rawObjects.{name}[{i}]: expected an object")
            documents.append({**item, "apiVersion": item.get("apiVersion") or api_version, "kind": kind})
    return documents


def _partition(documents: list[dict[str, Any]], params: Mapping[str, Any], warnings: list[str]) -> list[dict[str, Any]]:
    """KAI's shard selector: with a node-pool label key, only nodes, queues and pod groups labelled
    with this shard's value (or, for the default shard, without the label) belong to it."""
    key = str(params.get("NodePoolLabelKey") or "")
    if not key:
        return documents
    value = str(params.get("NodePoolLabelValue") or "")
    kept = []
    for doc in documents:
        if doc["kind"] in ("Node", "Queue", "PodGroup"):
            labels = (doc.get("metadata") or {}).get("labels") or {}
            if (labels.get(key) == value) if value else (key not in labels):
                kept.append(doc)
        else:
            kept.append(doc)
    if len(kept) < len(documents):
        shard = f"{key}={value}" if value else f"no {key} label"
        warnings.append(f"node pool ({shard}): {len(documents) - len(kept)} objects of other pools left out")
    return kept


def _plugins(config: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    plugins: dict[str, Mapping[str, Any]] = {}
    for tier in config.get("tiers") or []:
        for plugin in (tier or {}).get("plugins") or []:
            if isinstance(plugin, Mapping) and plugin.get("name"):
                plugins[str(plugin["name"])] = plugin.get("arguments") or {}
    return plugins


def _switched(listed: list[str], gpu_binpack: bool) -> dict[str, Any]:
    """kai-ray's ``plugins`` for KAI's tier list: what kai-ray can turn off and the list leaves
    out, and the job-order plugins' order where the list swaps them."""
    out: dict[str, Any] = {}
    for name in sorted(SWITCHABLE):
        on_by_default = gpu_binpack if name == "gpusharingorder" else True
        if name not in listed and on_by_default:
            out[name] = {"enabled": False}
    first, second = ORDERED
    if first in listed and second in listed and listed.index(second) < listed.index(first):
        out[second] = {"priority": DEFAULT_PRIORITIES[first] + 50}
    return out


def _seconds(nanoseconds: Any, where: str) -> float:
    if isinstance(nanoseconds, bool) or not isinstance(nanoseconds, int | float):
        raise InputError(f"{where}: expected nanoseconds, got {nanoseconds!r}")
    return float(nanoseconds) / 1e9


def config_from_kai(config: Mapping[str, Any], params: Mapping[str, Any], warnings: list[str]) -> dict[str, Any]:
    """kai-ray's config for the session KAI's snapshot tool would run with this config and these
    parameters (a parameter missing from the JSON is Go's zero value, as the tool reads it)."""
    plugins = _plugins(config)
    actions = [a.strip() for a in str(config.get("actions") or "").split(",") if a.strip()]
    out: dict[str, Any] = {"actions": actions}
    if params.get("schedulerName"):
        out["schedulerName"] = str(params["schedulerName"])
    placement = plugins.get("nodeplacement", {})
    out["placementStrategy"] = {
        "gpu": str(placement.get("gpu") or "binpack"),
        "cpu": str(placement.get("cpu") or "binpack"),
        "gpuDevice": "spread" if "gpuspread" in plugins and "gpupack" not in plugins else "pack",
    }
    proportion = plugins.get("proportion", {})
    for ours, theirs in (("kValue", "kValue"), ("reclaimerSaturationMultiplier", "relcaimerSaturationMultiplier")):
        if proportion.get(theirs) is not None:
            try:
                out[ours] = float(proportion[theirs])
            except (TypeError, ValueError):
                raise InputError(f"config: proportion.arguments.{theirs}: not a number") from None
    minruntime = plugins.get("minruntime", {})
    for name in ("defaultPreemptMinRuntime", "defaultReclaimMinRuntime"):
        if minruntime.get(name):
            out[name] = str(minruntime[name])
    if plugins:
        out["plugins"] = _switched(list(plugins), out["placementStrategy"]["gpu"] == "binpack")
    preemptees = params.get("maxNumberConsolidationPreemptees", 0)
    out["maxConsolidationPreemptees"] = UNLIMITED_PREEMPTEES if preemptees == -1 else max(int(preemptees or 0), 0)
    out["useSchedulingSignatures"] = bool(params.get("useSchedulingSignatures", False))
    out["allowConsolidatingReclaim"] = bool(params.get("allowConsolidatingReclaim", False))
    grace = params.get("globalDefaultStalenessGracePeriod", 0)
    out["defaultStalenessGracePeriod"] = _seconds(grace, "schedulerParams.globalDefaultStalenessGracePeriod")
    out["victimSearchBackoff"] = 0.0  # one session, as KAI's snapshot tool runs it
    _warn_unused(config, params, plugins, warnings)
    return out


def _warn_unused(
    config: Mapping[str, Any], params: Mapping[str, Any], plugins: Mapping[str, Any], warnings: list[str]
) -> None:
    if config.get("queueDepthPerAction"):
        warnings.append("config.queueDepthPerAction is not applied: kai-ray tries every job of a queue")
    if config.get("usageDBConfig"):
        warnings.append("config.usageDBConfig is not applied: no historical usage in a replay (kValue has no effect)")
    unknown = sorted(name for name in plugins if not known(name))
    if unknown:
        warnings.append(f"config: plugins kai-ray does not have are ignored: {', '.join(unknown)}")
    for name in ("proportion", "predicates", "nodeplacement"):
        if plugins and name not in plugins:
            warnings.append(f"config: plugin {name} is off in the snapshot, kai-ray applies it all the same")
    if params.get("fullHierarchyFairness") is False or (params and "fullHierarchyFairness" not in params):
        warnings.append("schedulerParams.fullHierarchyFairness is false: kai-ray divides fairly at every level")
    if params.get("restrictSchedulingNodes"):
        warnings.append("schedulerParams.restrictSchedulingNodes is not applied: every node takes every pod")
