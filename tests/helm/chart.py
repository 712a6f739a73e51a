"""Rendering helm/kai-ray with Helm's own engine, and checking objects the way an API server would.

Rendering goes through ``helm-python-sdk``, which loads Helm's Go library: templates, Sprig
functions, ``.Capabilities`` and ``fail`` behave exactly as in ``helm template``. Built-in
kinds are checked against the Kubernetes OpenAPI schemas that ``kubernetes-validate`` ships;
Queue and PodGroup against the chart's own CRD schemas, strictly (an unknown field fails, as
``kubectl apply --validate=strict`` does).
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import helm_python
import jsonschema
import kubernetes_validate
import yaml
from helm_python import _native

from kai_ray.quantity import parse_quantity

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "kai-ray"
RELEASE = "kai-ray"
NAMESPACE = "kai-system"
MONITORING_API = "monitoring.coreos.com/v1"
# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and the newest schema shipped.
KUBE_VERSIONS = ("1.29.0", kubernetes_validate.latest_version())

Obj = dict[str, Any]


@functools.cache
def _chart() -> helm_python.Chart:
    return helm_python.Chart.load(str(CHART))


def render(values: Mapping[str, Any] | None = None, *, api_versions: Iterable[str] = ()) -> list[Obj]:
    """Every object the chart's templates produce for these values, in file order.

    ``Chart.render`` has no way to declare extra API versions, so this calls the same native
    entry point with Helm's ``api_versions`` option (what ``helm template --api-versions`` sets):
    that is how a test says "the cluster serves monitoring.coreos.com/v1".
    """
    options = {"name": RELEASE, "namespace": NAMESPACE, "is_install": True, "api_versions": list(api_versions)}
    chart = _chart()
    manifests: dict[str, str] = json.loads(
        _native.call_string("helm_render", chart._raw(), json.dumps(dict(values or {})), json.dumps(options))
    )
    return [doc for _, text in sorted(manifests.items()) for doc in yaml.safe_load_all(text) if doc]


def crds() -> list[Obj]:
    """The CustomResourceDefinitions under crds/, as Helm finds them."""
    return [doc for entry in _chart().crds for doc in yaml.safe_load_all(entry["data"]) if doc]


def find(objects: Iterable[Obj], kind: str, name: str | None = None) -> list[Obj]:
    return [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]


def one(objects: Iterable[Obj], kind: str, name: str | None = None) -> Obj:
    found = find(objects, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def manifests_in(path: Path) -> Iterator[Obj]:
    """Objects of a YAML file: a multi-document stream, a kubectl List, or both."""
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc:
            continue
        if doc.get("kind") == "List":
            yield from doc.get("items") or []
        else:
            yield doc


# ---------------------------------------------------------------- Kubernetes schemas


def kubernetes_problem(obj: Obj, version: str) -> str | None:
    """Why the API server of ``version`` would refuse ``obj`` (strict: unknown fields too), or None.

    Raises SchemaNotFoundError for kinds kubernetes-validate has no schema for.
    """
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        return f"{obj['kind']} {obj['metadata'].get('name')}: {where}: {exc.message}"
    return None


def pod_template_problem(template: Obj, version: str) -> str | None:
    """A pod template embedded in a custom resource, checked as a core/v1 PodTemplate's."""
    wrapper = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "embedded"}, "template": template}
    return kubernetes_problem(wrapper, version)


# ---------------------------------------------------------------- CRD schemas


def crd_named(name: str) -> Obj:
    [crd] = [c for c in crds() if c["metadata"]["name"] == name]
    return crd


def crd_version(crd: Obj, version: str) -> Obj:
    [served] = [v for v in crd["spec"]["versions"] if v["name"] == version]
    return served


def _strict(node: Any) -> Any:
    """The CRD schema as JSON Schema where undeclared fields are errors, as in a strict apply."""
    if isinstance(node, list):
        return [_strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _strict(v) for k, v in node.items()}
    open_object = node.get("x-kubernetes-preserve-unknown-fields") is True
    if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node and not open_object:
        out["additionalProperties"] = False
    return out


def custom_resource_problems(obj: Obj) -> list[str]:
    """Why ``obj`` does not fit the chart's CRD for its kind and version (empty when it fits)."""
    group, _, version = obj["apiVersion"].rpartition("/")
    matches = [c for c in crds() if c["spec"]["group"] == group and c["spec"]["names"]["kind"] == obj["kind"]]
    if not matches:
        return [f"no CRD of the chart defines {obj['apiVersion']} {obj['kind']}"]
    served = [v for v in matches[0]["spec"]["versions"] if v["name"] == version and v["served"]]
    if not served:
        return [f"{obj['kind']} is not served at version {version}"]
    schema = _strict(copy.deepcopy(served[0]["schema"]["openAPIV3Schema"]))
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    name = obj.get("metadata", {}).get("name")
    return [
        f"{obj['kind']} {name}: {'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
        for e in validator.iter_errors(obj)
    ]


def structural_problems(node: Obj, path: str = "", root: bool = True) -> list[str]:
    """The apiextensions rules for a structural schema that a typo most often breaks.

    Every node has a type (unless it is int-or-string or keeps unknown fields), never both
    properties and additionalProperties, arrays say what their items are, enums fit the type,
    and the root's metadata is left to the API server.
    """
    problems = []
    exempt = node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
    if "type" not in node and not exempt:
        problems.append(f"{path or '/'}: no type")
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{path}: both properties and additionalProperties")
    if node.get("type") == "array" and "items" not in node:
        problems.append(f"{path}: an array without items")
    wanted = {"string": str, "integer": int, "number": (int, float), "boolean": bool}.get(node.get("type", ""))
    if wanted and any(not isinstance(v, wanted) for v in node.get("enum", [])):
        problems.append(f"{path}: an enum value that is not a {node['type']}")
    if root and set(node.get("properties", {}).get("metadata", {})) - {"type"}:
        problems.append("/metadata: only `type: object` is allowed at the root")
    for key, child in node.get("properties", {}).items():
        problems += structural_problems(child, f"{path}/{key}", root=False)
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            problems += structural_problems(node[key], f"{path}/{key}", root=False)
    return problems


def pod_templates(obj: Obj) -> list[Obj]:
    """The pod templates inside a workload object (a Deployment's, a RayCluster's groups')."""
    spec = obj.get("spec") or {}
    if obj["kind"] == "RayCluster":
        groups = [spec.get("headGroupSpec") or {}] + list(spec.get("workerGroupSpecs") or [])
        return [g["template"] for g in groups if isinstance(g.get("template"), dict)]
    return [spec["template"]] if isinstance(spec.get("template"), dict) else []


def resource_problems(obj: Obj) -> list[str]:
    """Requests above limits: the API server refuses such pods, but no OpenAPI schema says so."""
    problems = []
    for template in pod_templates(obj):
        for container in template.get("spec", {}).get("containers") or []:
            resources = container.get("resources") or {}
            limits = resources.get("limits") or {}
            for name, request in (resources.get("requests") or {}).items():
                if name in limits and parse_quantity(request) > parse_quantity(limits[name]):
                    problems.append(
                        f"{obj['kind']} {obj['metadata']['name']} container {container['name']}: "
                        f"{name} request {request} is above its limit {limits[name]}"
                    )
    return problems


def problems_of(objects: Iterable[Obj]) -> list[str]:
    """Every reason an API server (or the CRDs' controllers) would refuse one of ``objects``."""
    problems: list[str] = []
    for obj in objects:
        problems += resource_problems(obj)
        if obj["kind"] in ("Queue", "PodGroup", "Topology"):
            problems += custom_resource_problems(obj)
        elif obj["kind"] == "ServiceMonitor":
            problems += service_monitor_problems(obj)
        elif obj["kind"] == "RayCluster":
            problems += ray_cluster_problems(obj)
        else:
            for version in KUBE_VERSIONS:
                problem = kubernetes_problem(obj, version)  # SchemaNotFoundError: a kind nobody checks
                if problem:
                    problems.append(f"[{version}] {problem}")
    return problems


# ---------------------------------------------------------------- kinds without a published schema


def service_monitor_problems(monitor: Obj) -> list[str]:
    """The fields the Prometheus operator needs: a selector and at least one endpoint naming a port."""
    problems = []
    if monitor.get("apiVersion") != MONITORING_API:
        problems.append(f"ServiceMonitor apiVersion {monitor.get('apiVersion')}")
    if not monitor.get("metadata", {}).get("name"):
        problems.append("ServiceMonitor without metadata.name")
    spec = monitor.get("spec") or {}
    if not (spec.get("selector") or {}).get("matchLabels"):
        problems.append("ServiceMonitor spec.selector.matchLabels is empty: it would select every Service")
    endpoints = spec.get("endpoints") or []
    if not endpoints or not all(isinstance(e, dict) and isinstance(e.get("port"), str) for e in endpoints):
        problems.append("ServiceMonitor spec.endpoints must list endpoints that name a Service port")
    return problems


def ray_cluster_problems(cluster: Obj) -> list[str]:
    """KubeRay's required fields, string-only rayStartParams, and valid pod templates."""
    problems = []
    if cluster.get("apiVersion") != "ray.io/v1":
        problems.append(f"RayCluster apiVersion {cluster.get('apiVersion')}")
    spec = cluster.get("spec") or {}
    head = spec.get("headGroupSpec") or {}
    groups = [("headGroupSpec", head)] + [
        (f"workerGroupSpecs/{i}", g) for i, g in enumerate(spec.get("workerGroupSpecs") or [])
    ]
    for where, group in groups:
        params = group.get("rayStartParams")
        if not isinstance(params, dict) or not all(isinstance(v, str) for v in params.values()):
            problems.append(f"RayCluster {where}/rayStartParams must map names to strings: {params!r}")
        template = group.get("template")
        if not isinstance(template, dict) or not template.get("spec", {}).get("containers"):
            problems.append(f"RayCluster {where}/template needs containers")
            continue
        for version in KUBE_VERSIONS:
            problem = pod_template_problem(template, version)
            if problem:
                problems.append(f"[{version}] RayCluster {where}: {problem}")
    for where, group in groups[1:]:
        if not group.get("groupName"):
            problems.append(f"RayCluster {where} needs a groupName")
        sizes = [group.get(k) for k in ("minReplicas", "replicas", "maxReplicas")]
        if not all(isinstance(s, int) for s in sizes) or not sizes[0] <= sizes[1] <= sizes[2]:
            problems.append(f"RayCluster {where}: need minReplicas <= replicas <= maxReplicas, got {sizes}")
    return problems
