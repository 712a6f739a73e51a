"""The Kubernetes kinds the adapter watches, where they live in the API, and how they decode."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Kind:
    name: str  # what the cache calls it
    group: str  # "" for the core group
    version: str
    plural: str
    namespaced: bool

    @property
    def api_kind(self) -> str:
        """The kind as the API names it (the cache names the Workload API's PodGroup apart from
        KAI's, by its group)."""
        return self.name.split(".", 1)[0]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_prefix(self) -> str:
        return f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"

    def collection(self, namespace: str | None = None) -> str:
        """The list/watch path (all namespaces when ``namespace`` is None)."""
        if namespace and self.namespaced:
            return f"{self.api_prefix}/namespaces/{namespace}/{self.plural}"
        return f"{self.api_prefix}/{self.plural}"

    def item(self, name: str, namespace: str | None = None, subresource: str = "") -> str:
        base = self.collection(namespace)
        return f"{base}/{name}/{subresource}" if subresource else f"{base}/{name}"


NODES = Kind("Node", "", "v1", "nodes", False)
PODS = Kind("Pod", "", "v1", "pods", True)
QUEUES = Kind("Queue", "scheduling.run.ai", "v2", "queues", False)
POD_GROUPS = Kind("PodGroup", "scheduling.run.ai", "v2alpha2", "podgroups", True)
PRIORITY_CLASSES = Kind("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", False)
TOPOLOGIES = Kind("Topology", "kai.scheduler", "v1alpha1", "topologies", False)
EVENTS = Kind("Event", "", "v1", "events", True)
LEASES = Kind("Lease", "coordination.k8s.io", "v1", "leases", True)
CONFIG_MAPS = Kind("ConfigMap", "", "v1", "configmaps", True)  # a fraction's GPU environment
# Dynamic Resource Allocation, resource.k8s.io/v1 (Kubernetes 1.34).
RESOURCE_SLICES = Kind("ResourceSlice", "resource.k8s.io", "v1", "resourceslices", False)
DEVICE_CLASSES = Kind("DeviceClass", "resource.k8s.io", "v1", "deviceclasses", False)
RESOURCE_CLAIMS = Kind("ResourceClaim", "resource.k8s.io", "v1", "resourceclaims", True)

WATCHED = (NODES, PODS, QUEUES, POD_GROUPS, PRIORITY_CLASSES, TOPOLOGIES)

# The Kubernetes Workload API (scheduling.k8s.io): watched in the newest of these versions the API
# server serves, and not at all where it serves none (the GenericWorkload feature gate is off, or
# the cluster predates it). One cache name per kind, whatever the version.
WORKLOAD_API_VERSIONS = ("v1beta1", "v1alpha3", "v1alpha2")
GANG_POD_GROUPS = tuple(
    Kind("PodGroup.scheduling.k8s.io", "scheduling.k8s.io", v, "podgroups", True) for v in WORKLOAD_API_VERSIONS
)
WORKLOADS = tuple(Kind("Workload", "scheduling.k8s.io", v, "workloads", True) for v in WORKLOAD_API_VERSIONS)
WORKLOAD_API_WATCHED = (GANG_POD_GROUPS, WORKLOADS)  # each: one resource, newest version first
DRA_WATCHED = (RESOURCE_SLICES, DEVICE_CLASSES, RESOURCE_CLAIMS)  # with `run --dra`

# Owners the pod grouper walks to find a workload's top owner.
OWNER_KINDS = {
    ("batch/v1", "Job"): Kind("Job", "batch", "v1", "jobs", True),
    ("batch/v1", "CronJob"): Kind("CronJob", "batch", "v1", "cronjobs", True),
    ("apps/v1", "ReplicaSet"): Kind("ReplicaSet", "apps", "v1", "replicasets", True),
    ("apps/v1", "Deployment"): Kind("Deployment", "apps", "v1", "deployments", True),
    ("apps/v1", "StatefulSet"): Kind("StatefulSet", "apps", "v1", "statefulsets", True),
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): Kind("JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets", True),
    ("kubeflow.org/v1", "PyTorchJob"): Kind("PyTorchJob", "kubeflow.org", "v1", "pytorchjobs", True),
    ("kubeflow.org/v2beta1", "MPIJob"): Kind("MPIJob", "kubeflow.org", "v2beta1", "mpijobs", True),
    ("kubeflow.org/v1", "MPIJob"): Kind("MPIJob", "kubeflow.org", "v1", "mpijobs", True),
    ("ray.io/v1", "RayJob"): Kind("RayJob", "ray.io", "v1", "rayjobs", True),
    ("ray.io/v1", "RayCluster"): Kind("RayCluster", "ray.io", "v1", "rayclusters", True),
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): Kind(
        "LeaderWorkerSet", "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", True
    ),
    ("kubeflow.org/v1", "TFJob"): Kind("TFJob", "kubeflow.org", "v1", "tfjobs", True),
    ("kubeflow.org/v1", "XGBoostJob"): Kind("XGBoostJob", "kubeflow.org", "v1", "xgboostjobs", True),
    ("kubeflow.org/v1", "JAXJob"): Kind("JAXJob", "kubeflow.org", "v1", "jaxjobs", True),
    ("kubeflow.org/v1beta1", "Notebook"): Kind("Notebook", "kubeflow.org", "v1beta1", "notebooks", True),
    ("serving.knative.dev/v1", "Configuration"): Kind(
        "Configuration", "serving.knative.dev", "v1", "configurations", True
    ),
    ("serving.knative.dev/v1", "Service"): Kind("Service", "serving.knative.dev", "v1", "services", True),
    ("serving.knative.dev/v1", "Revision"): Kind("Revision", "serving.knative.dev", "v1", "revisions", True),
}
KNATIVE_REVISION = OWNER_KINDS[("serving.knative.dev/v1", "Revision")]


def resource_version(obj: dict[str, Any]) -> int | None:
    """An object's metadata.resourceVersion as a number (None when absent or not a number)."""
    raw = (obj.get("metadata") or {}).get("resourceVersion")
    try:
        return int(raw) if raw is not None else None
    except (TypeError, ValueError):
        return None
