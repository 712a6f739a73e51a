"""CustomResourceDefinitions: the KAI CRDs served from the start, and CRDs created through the API.

A stored CRD is served at once (the real apiextensions server takes a moment to establish it;
clients that wait for the Established condition find it already True). Deleting a CRD deletes
its objects and stops serving it. Schemas are stored but not enforced: custom resources are
accepted as sent, apart from the status subresource split every CRD declaring it gets.
"""

from __future__ import annotations

from typing import Any

from devcluster.catalog import Catalog, ResourceType
from devcluster.registry import Causes, Registry, Strategy
from devcluster.store import Change, Store

Obj = dict[str, Any]
CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")
_OPEN_SCHEMA = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}


def crd(
    group: str,
    kind: str,
    plural: str,
    scope: str,
    version: str,
    short_names: tuple[str, ...] = (),
    columns: tuple[tuple[str, str, str], ...] = (),
) -> Obj:
    """A one-version CRD manifest with a status subresource and (name, jsonPath, type) printer columns."""
    served: Obj = {
        "name": version,
        "served": True,
        "storage": True,
        "schema": _OPEN_SCHEMA,
        "subresources": {"status": {}},
    }
    if columns:
        served["additionalPrinterColumns"] = [{"name": n, "jsonPath": p, "type": t} for n, p, t in columns]
    names: Obj = {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()}
    if short_names:
        names["shortNames"] = list(short_names)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "names": names, "scope": scope, "versions": [served]},
    }


# The shapes of KAI Scheduler's own CRDs (deployments/kai-scheduler/crds): names, scope, version,
# short names and printer columns as KAI declares them.
KAI_CRDS = (
    crd(
        "scheduling.run.ai",
        "Queue",
        "queues",
        "Cluster",
        "v2",
        columns=(
            ("Priority", ".spec.priority", "string"),
            ("Parent", ".spec.parentQueue", "string"),
            ("Children", ".status.childQueues", "string"),
            ("DisplayName", ".spec.displayName", "string"),
        ),
    ),
    crd("scheduling.run.ai", "PodGroup", "podgroups", "Namespaced", "v2alpha2", short_names=("pg",)),
    crd("kai.scheduler", "Topology", "topologies", "Cluster", "v1alpha1"),
)


def accepted_status(obj: Obj, now: str) -> Obj:
    spec = obj.get("spec") or {}
    storage = [v.get("name") for v in spec.get("versions") or [] if v.get("storage")]
    conditions = [
        {"type": t, "status": "True", "reason": r, "message": m, "lastTransitionTime": now}
        for t, r, m in (
            ("NamesAccepted", "NoConflicts", "no conflicts found"),
            ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        )
    ]
    return {"acceptedNames": spec.get("names") or {}, "conditions": conditions, "storedVersions": storage}


class CrdStrategy(Strategy):
    def prepare_create(self, reg: Registry, rt: ResourceType, obj: Obj) -> None:
        obj["status"] = accepted_status(obj, reg.clock.timestamp())

    def prepare_update(self, reg: Registry, rt: ResourceType, new: Obj, old: Obj, subresource: str) -> None:
        if not subresource and new.get("spec") != old.get("spec"):
            new["status"] = accepted_status(new, reg.clock.timestamp())

    def validate(self, reg: Registry, rt: ResourceType, obj: Obj, old: Obj | None) -> Causes:
        spec = obj.get("spec") or {}
        names = spec.get("names") or {}
        causes: Causes = []
        for field, value in (
            ("spec.group", spec.get("group")),
            ("spec.names.plural", names.get("plural")),
            ("spec.names.kind", names.get("kind")),
        ):
            if not value:
                causes.append((field, "Required value"))
        if spec.get("scope") not in ("Namespaced", "Cluster"):
            causes.append(("spec.scope", 'Unsupported value: supported values: "Cluster", "Namespaced"'))
        versions = spec.get("versions") or []
        if not versions or not all(isinstance(v, dict) and v.get("name") for v in versions):
            causes.append(("spec.versions", "Required value: must have at least one version, each with a name"))
        elif sum(1 for v in versions if v.get("storage")) != 1:
            causes.append(("spec.versions", "Invalid value: must have exactly one version marked as storage version"))
        expected = f"{names.get('plural')}.{spec.get('group')}"
        if not causes and obj["metadata"]["name"] != expected:
            causes.append(
                (
                    "metadata.name",
                    f'Invalid value: "{obj["metadata"]["name"]}": must be spec.names.plural+"."+spec.group',
                )
            )
        if old is not None and (old.get("spec") or {}).get("scope") != spec.get("scope"):
            causes.append(("spec.scope", "Invalid value: field is immutable"))
        return causes


def follow_crds(store: Store, catalog: Catalog) -> None:
    """Keep the catalog in step with stored CRDs, whoever writes them."""

    def on_change(rt: ResourceType, change: Change) -> None:
        if rt.storage_key != CRD_KEY:
            return
        if change.type == "DELETED":
            gone = catalog.forget_crd(change.obj["metadata"]["name"])
            if gone:
                store.drop_table(gone[0])  # all versions share one table
        else:
            catalog.serve_crd(change.obj)

    store.listeners.append(on_change)
