"""The resources the dev cluster serves and how discovery describes them."""

from __future__ import annotations

from dataclasses import dataclass

ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True, slots=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    singular: str = ""

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_version(self) -> str:
        return self.group_version

    def discovery(self) -> list[dict[str, object]]:
        entries: list[dict[str, object]] = [{
            "name": self.plural, "singularName": self.singular or self.kind.lower(), "namespaced": self.namespaced,
            "kind": self.kind, "verbs": ALL_VERBS, "shortNames": list(self.short_names),
        }]
        for sub in self.subresources:
            verbs = ["create"] if sub in ("binding", "eviction") else ["get", "patch", "update"]
            entries.append({"name": f"{self.plural}/{sub}", "singularName": "", "namespaced": self.namespaced,
                            "kind": {"binding": "Binding", "eviction": "Eviction"}.get(sub, self.kind),
                            "verbs": verbs})
        return entries


BUILT_IN = (
    Resource("", "v1", "namespaces", "Namespace", False, ("ns",), ("status",)),
    Resource("", "v1", "nodes", "Node", False, ("no",), ("status",)),
    Resource("", "v1", "pods", "Pod", True, ("po",), ("status", "binding", "eviction")),
    Resource("", "v1", "events", "Event", True, ("ev",)),
    Resource("", "v1", "configmaps", "ConfigMap", True, ("cm",)),
    Resource("events.k8s.io", "v1", "events", "Event", True, ("ev",)),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True),
    Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, ("pc",)),
    Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",), ("status",)),
    Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False,
             ("crd", "crds"), ("status",)),
    Resource("scheduling.run.ai", "v2", "queues", "Queue", False, ("q",), ("status",), "queue"),
    Resource("scheduling.run.ai", "v2alpha2", "podgroups", "PodGroup", True, ("pg",), ("status",), "podgroup"),
)


class Catalog:
    """Served resources by (group, version, plural); CRDs created through the API join it."""

    def __init__(self) -> None:
        self.resources: dict[tuple[str, str, str], Resource] = {}
        for resource in BUILT_IN:
            self.add(resource)

    def add(self, resource: Resource) -> None:
        self.resources[(resource.group, resource.version, resource.plural)] = resource

    def find(self, group: str, version: str, plural: str) -> Resource | None:
        return self.resources.get((group, version, plural))

    def add_crd(self, crd: dict[str, object]) -> None:
        spec = crd.get("spec") or {}
        assert isinstance(spec, dict)
        names = spec.get("names") or {}
        assert isinstance(names, dict)
        for version in spec.get("versions") or []:
            if isinstance(version, dict) and version.get("served", True):
                subresources = tuple((version.get("subresources") or {}).keys())
                self.add(Resource(str(spec.get("group")), str(version.get("name")), str(names.get("plural")),
                                  str(names.get("kind")), spec.get("scope") == "Namespaced",
                                  tuple(names.get("shortNames") or ()), subresources, str(names.get("singular") or "")))

    def group_versions(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for group, version, _ in self.resources:
            if group and version not in out.setdefault(group, []):
                out[group].append(version)
        return out

    def in_group_version(self, group: str, version: str) -> list[Resource]:
        return [r for (g, v, _), r in self.resources.items() if g == group and v == version]
