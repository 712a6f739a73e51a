"""Which resources the dev cluster serves, and the facts discovery and field selectors need.

Built-in kinds are listed here; custom resources join when a CustomResourceDefinition is
stored (the two KAI CRDs are stored at start-up, so they are served out of the box) and
leave when it is deleted. All versions of one resource share one storage table, keyed by
(group, plural), as in Kubernetes; the dev cluster does no version conversion.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
STATUS_VERBS = ("get", "patch", "update")
COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
POD_FIELDS = COMMON_FIELDS | {
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
}
EVENT_FIELDS = COMMON_FIELDS | {
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
}


@dataclass(frozen=True, slots=True)
class Subresource:
    name: str
    kind: str
    verbs: tuple[str, ...]
    group: str = ""  # the group of the kind posted to it, when it differs (pods/eviction is policy)
    version: str = ""


STATUS = Subresource("status", "", STATUS_VERBS)


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[Subresource, ...] = ()
    singular: str = ""
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    fields: frozenset[str] = COMMON_FIELDS
    custom: bool = False
    printer_columns: tuple[Obj, ...] = ()  # a CRD version's additionalPrinterColumns

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def storage_key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def has_status(self) -> bool:
        return any(s.name == "status" for s in self.subresources)

    def subresource(self, name: str) -> Subresource | None:
        return next((s for s in self.subresources if s.name == name), None)

    def discovery_entries(self) -> list[Obj]:
        """This resource's entries in its group version's APIResourceList."""
        entry: Obj = {
            "name": self.plural,
            "singularName": self.singular or self.kind.lower(),
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(self.verbs),
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        if self.categories:
            entry["categories"] = list(self.categories)
        entries = [entry]
        for sub in self.subresources:
            sub_entry: Obj = {
                "name": f"{self.plural}/{sub.name}",
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": sub.kind or self.kind,
                "verbs": list(sub.verbs),
            }
            if sub.group or sub.version:
                sub_entry.update(group=sub.group, version=sub.version)
            entries.append(sub_entry)
        return entries


def _core(
    plural: str,
    kind: str,
    namespaced: bool,
    *short: str,
    subs: tuple[Subresource, ...] = (),
    fields: frozenset[str] = COMMON_FIELDS,
    verbs: tuple[str, ...] = ALL_VERBS,
) -> ResourceType:
    return ResourceType("", "v1", plural, kind, namespaced, short, subs, fields=fields, verbs=verbs)


BUILT_IN = (
    _core("namespaces", "Namespace", False, "ns", subs=(STATUS,), fields=COMMON_FIELDS | {"status.phase"}),
    _core("nodes", "Node", False, "no", subs=(STATUS,), fields=COMMON_FIELDS | {"spec.unschedulable"}),
    ResourceType(
        "",
        "v1",
        "pods",
        "Pod",
        True,
        ("po",),
        (
            STATUS,
            Subresource("binding", "Binding", ("create",)),
            Subresource("eviction", "Eviction", ("create",), "policy", "v1"),
            Subresource("log", "Pod", ("get",)),
        ),
        categories=("all",),
        fields=POD_FIELDS,
    ),
    _core("bindings", "Binding", True, verbs=("create",)),
    _core("events", "Event", True, "ev", fields=EVENT_FIELDS),
    _core("configmaps", "ConfigMap", True, "cm"),
    ResourceType("events.k8s.io", "v1", "events", "Event", True, ("ev",)),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True),
    ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, ("pc",)),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",), (STATUS,)),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        ("crd", "crds"),
        (STATUS,),
        categories=("api-extensions",),
    ),
    # Workload owners are stored but not reconciled (no controllers): the pod grouper reads them.
    ResourceType("apps", "v1", "deployments", "Deployment", True, ("deploy",), (STATUS,), categories=("all",)),
    ResourceType("apps", "v1", "replicasets", "ReplicaSet", True, ("rs",), (STATUS,), categories=("all",)),
    ResourceType("apps", "v1", "statefulsets", "StatefulSet", True, ("sts",), (STATUS,), categories=("all",)),
    ResourceType("batch", "v1", "jobs", "Job", True, (), (STATUS,), categories=("all",)),
    # Dynamic Resource Allocation, as Kubernetes 1.34 serves it (claims made by claims.py).
    ResourceType("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False),
    ResourceType("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False),
    ResourceType("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True, (), (STATUS,)),
    ResourceType("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True),
)


# The Kubernetes Workload API as 1.37 serves it with the GenericWorkload feature gate on and
# scheduling.k8s.io/v1beta1 enabled; served only when the cluster is made with it (off in 1.34).
WORKLOAD_API = (
    ResourceType("scheduling.k8s.io", "v1beta1", "workloads", "Workload", True),
    ResourceType("scheduling.k8s.io", "v1beta1", "podgroups", "PodGroup", True, (), (STATUS,)),
)


def types_from_crd(crd: Obj) -> list[ResourceType]:
    """The resource types a CustomResourceDefinition serves, one per served version."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    out = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        subresources = tuple(
            STATUS if name == "status" else Subresource(name, "Scale", STATUS_VERBS, "autoscaling", "v1")
            for name in (version.get("subresources") or {})
        )
        out.append(
            ResourceType(
                str(spec.get("group", "")),
                str(version.get("name", "")),
                str(names.get("plural", "")),
                str(names.get("kind", "")),
                spec.get("scope", "Namespaced") == "Namespaced",
                tuple(names.get("shortNames") or ()),
                subresources,
                str(names.get("singular") or ""),
                tuple(names.get("categories") or ()),
                custom=True,
                printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
            )
        )
    return out


@dataclass(slots=True)
class Catalog:
    """Served resource types, looked up by URL parts or listed per group."""

    _by_path: dict[tuple[str, str, str], ResourceType] = field(default_factory=dict)
    _from_crd: dict[str, list[ResourceType]] = field(default_factory=dict)  # CRD name -> its types

    @classmethod
    def with_builtins(cls) -> Catalog:
        catalog = cls()
        catalog.add(BUILT_IN)
        return catalog

    def add(self, types: Iterable[ResourceType]) -> None:
        for rt in types:
            self._by_path[(rt.group, rt.version, rt.plural)] = rt

    def remove(self, types: Iterable[ResourceType]) -> None:
        for rt in types:
            self._by_path.pop((rt.group, rt.version, rt.plural), None)

    def serve_crd(self, crd: Obj) -> None:
        """(Re)serve what a stored CRD describes; an update replaces the previous types."""
        name = str((crd.get("metadata") or {}).get("name", ""))
        self.remove(self._from_crd.pop(name, []))
        types = types_from_crd(crd)
        self.add(types)
        self._from_crd[name] = types

    def forget_crd(self, name: str) -> list[ResourceType]:
        types = self._from_crd.pop(name, [])
        self.remove(types)
        return types

    def find(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def require(self, group: str, version: str, plural: str) -> ResourceType:
        rt = self.find(group, version, plural)
        if rt is None:
            raise KeyError(f"{plural}.{group}/{version} is not served")
        return rt

    def types(self) -> list[ResourceType]:
        return list(self._by_path.values())

    def group_versions(self) -> dict[str, list[str]]:
        """Served versions per named group, preferred (first served) first; the core group excluded."""
        out: dict[str, list[str]] = {}
        for group, version, _ in self._by_path:
            if group and version not in out.setdefault(group, []):
                out[group].append(version)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for (g, v, _), rt in self._by_path.items() if g == group and v == version]
