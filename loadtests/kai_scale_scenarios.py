"""KAI Scheduler's scale scenarios as data, and the Kubernetes objects they are made of.

Where they come from: KAI's scale suite, ``test/e2e/scale/kwok_test.go`` and
``kwok_test_functions.go`` in github.com/NVIDIA/KAI-Scheduler (``docs/scale-tests/README.md``
describes the set-up): kwok nodes of 8 GPUs each, 500 by default (``NODE_COUNT``), every queue a
child of one parent queue, each job a one-pod batch Job or a distributed job (one PodGroup whose
``minMember`` is its pod count), pods asking for GPUs only (``limits: nvidia.com/gpu``),
tolerating kwok's taint and requiring a ``type: kwok`` node. KAI measures each scenario by
reading its pods' ``PodScheduled`` times and its PodGroups' ``UnschedulableOnNodePool``
condition; here a watch opened beforehand sees them (to the 0.1 s, where KAI's timestamps count
whole seconds).

What differs, and why:

- one-pod jobs are bare pods, not batch Jobs: the test cluster runs no Job controller, so an
  evicted pod is gone where KAI's Job would make a new one that waits (pending) in its queue;
- KAI's published set-up tunes its deployment for scale (``hack/setup-scale-test-env.sh``:
  ``max-consolidation-preemptees=0`` for the scheduler, 100 concurrent reconciles for the
  binder); KAI runs here with the same two settings (``KAI_SCALE_ARGS``);
- the topology scenario has nodes of its own (zones x blocks x racks x 2 nodes), as in KAI,
  whatever ``--nodes`` says; its quick size has fewer domains.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kai_ray.app.sim.cluster import KWOK_TAINT, NodeShape, kwok_node

Obj = dict[str, Any]
NAMESPACE = "default"
GPUS_PER_NODE = 8  # KAI's gpusPerNode
DISTRIBUTED_PODS = 10  # KAI's defaultPodsPerDistributedJob
QUEUE_LABEL = "kai.scheduler/queue"
APP_LABEL = {"app": "kai-scale"}
PARENT, SANITY, RECLAIM = "parent", "sanity", "reclaim"
# KAI's scale test node template (its kwok NodePool): 32 CPUs, 256 GiB, 110 pods; 8 GPUs from
# the fake GPU operator.
NODE_SHAPE = NodeShape("kai-scale-8gpu", GPUS_PER_NODE, 81920, "NVIDIA-H100-80GB-HBM3", 32, 256)
TOPOLOGY = "e2e-topology-tree"
TOPOLOGY_LEVELS = (  # KAI's: label, short name
    ("cloud.provider.com/topology-zone", "zone"),
    ("cloud.provider.com/topology-block", "block"),
    ("cloud.provider.com/topology-rack", "rack"),
)
NODES_PER_RACK = 2  # KAI's nodesPerDomain
# The tuning of KAI's published scale set-up (hack/setup-scale-test-env.sh), as component arguments.
KAI_SCALE_ARGS = {
    "scheduler": ("--max-consolidation-preemptees=0",),
    "binder": ("--max-concurrent-reconciles=100",),
}


@dataclass(frozen=True, slots=True)
class Scenario:
    key: str  # what --scenarios names
    title: str  # KAI's test name
    measures: str  # what the seconds are
    plain_pods: bool  # kube-scheduler runs it too (no queues, gangs or reclaim involved)
    published: float  # KAI's published figure, seconds, at 500 nodes of 8 GPUs
    timeout: float  # seconds for the measured part, full size (quick: QUICK_TIMEOUT)


SCENARIOS = (
    Scenario(
        "fill",
        "Fill Cluster with single GPU Jobs (scheduler disabled during job creation)",
        "scheduler start -> every one-GPU pod bound",
        True,
        398.0,
        2400.0,
    ),
    Scenario(
        "topology",
        "Allocate single distributed job with preferred topology",
        "scheduler start -> every pod of the gang bound",
        False,
        48.7,
        1200.0,
    ),
    Scenario(
        "infeasible",
        "measure time for reclaim to fail on distributed job last pod",
        "average, PodGroup created -> UnschedulableOnNodePool condition",
        False,
        249.5,
        900.0,
    ),
    Scenario(
        "reclaim-one",
        "reclaims single GPU Jobs at intervals to measure latency",
        "average, one-GPU pod created -> bound (the cluster full of another queue's jobs)",
        False,
        13.9,
        600.0,
    ),
    Scenario(
        "reclaim-large",
        "Full Node GPU Reclaimees: reclaims for one very large job",
        "PodGroup created -> last of its full-node pods bound",
        False,
        85.0,
        1800.0,
    ),
    Scenario(
        "reclaim-many",
        "Reclaim single GPU Jobs (as many as the cluster has GPUs)",
        "scheduler start -> every one-GPU pod of the reclaiming queue bound",
        False,
        694.0,
        3600.0,
    ),
)
BY_KEY = {s.key: s for s in SCENARIOS}
QUICK_TIMEOUT = 240.0


@dataclass(frozen=True, slots=True)
class Size:
    nodes: int
    topology: tuple[int, int, int]  # zones, blocks per zone, racks per block
    samples: int  # KAI's statusMeasuringSamples, for the averaged scenarios
    quick: bool

    @property
    def gpus(self) -> int:
        return self.nodes * GPUS_PER_NODE

    @property
    def topology_nodes(self) -> int:
        zones, blocks, racks = self.topology
        return zones * blocks * racks * NODES_PER_RACK

    @property
    def infeasible_quota(self) -> int:
        """The filling queue's GPU quota in the infeasible scenario: one GPU more than leaves room
        for a distributed job of full nodes, so reclaim can free all but one GPU of what it needs."""
        return self.gpus - DISTRIBUTED_PODS * GPUS_PER_NODE + 1

    def timeout(self, scenario: Scenario) -> float:
        return QUICK_TIMEOUT if self.quick else scenario.timeout


FULL = Size(nodes=500, topology=(4, 8, 8), samples=10, quick=False)
# CI's size: a few minutes on two cores for every scenario and system.
QUICK = Size(nodes=20, topology=(2, 2, 4), samples=3, quick=True)


# ---------------------------------------------------------------- objects
def queue(name: str, parent: str | None, gpu: tuple[float, float, float] = (-1, 1, -1)) -> Obj:
    """A v2 Queue; ``gpu`` is (quota, overQuotaWeight, limit). KAI's CreateQueueObject default is
    no quota (-1), weight 1, no limit, for every resource."""
    quota, weight, limit = gpu
    open_ = {"quota": -1, "overQuotaWeight": 1, "limit": -1}
    spec: Obj = {
        "resources": {
            "gpu": {"quota": quota, "overQuotaWeight": weight, "limit": limit},
            "cpu": dict(open_),
            "memory": dict(open_),
        }
    }
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def queues(sanity_gpu: tuple[float, float, float] = (-1, 1, -1)) -> list[Obj]:
    """KAI v0.12 schedules only queues with a parent: the parent first, then its children."""
    return [queue(PARENT, None), queue(SANITY, PARENT, sanity_gpu), queue(RECLAIM, PARENT)]


def nodes(count: int) -> list[Obj]:
    return [kwok_node(f"kwok-{i:05d}", NODE_SHAPE, i, taint=True) for i in range(count)]


def topology_nodes(size: Size) -> list[Obj]:
    """Every (zone, block, rack) domain with two nodes, labelled as KAI's node pools label them."""
    zones, blocks, racks = size.topology
    found: list[Obj] = []
    for z in range(zones):
        for b in range(blocks):
            for r in range(racks):
                for n in range(NODES_PER_RACK):
                    node = kwok_node(f"kwok-z{z + 1}-b{b + 1}-r{r + 1}-{n}", NODE_SHAPE, len(found), taint=True)
                    labels = node["metadata"]["labels"]
                    for (label, short), value in zip(TOPOLOGY_LEVELS, (z, b, r), strict=True):
                        labels[label] = f"{short}{value + 1}"
                    found.append(node)
    return found


def topology() -> Obj:
    return {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": TOPOLOGY},
        "spec": {"levels": [{"nodeLabel": label} for label, _ in TOPOLOGY_LEVELS]},
    }


def pod(name: str, queue_name: str, gpus: int, scheduler: str, group: str | None = None) -> Obj:
    """KAI's CreatePodObject with addKWOKTaintsAndAffinity: GPUs only, kwok nodes only, no grace."""
    metadata: Obj = {"name": name, "labels": {**APP_LABEL, QUEUE_LABEL: queue_name}}
    if group:
        metadata["annotations"] = {"pod-group-name": group}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "schedulerName": scheduler,
            "terminationGracePeriodSeconds": 0,
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {"key": KWOK_TAINT["key"], "value": KWOK_TAINT["value"], "effect": "NoSchedule"},
            ],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "type", "operator": "In", "values": ["kwok"]}]}
                        ]
                    }
                }
            },
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
        },
    }


def pod_group(name: str, queue_name: str, members: int, preferred_level: str | None = None) -> Obj:
    spec: Obj = {"minMember": members, "queue": queue_name}
    if preferred_level:
        spec["topologyConstraint"] = {"preferredTopologyLevel": preferred_level, "topology": TOPOLOGY}
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}


def single_gpu_jobs(prefix: str, count: int, queue_name: str, scheduler: str, gpus: int = 1) -> list[Obj]:
    return [pod(f"{prefix}-{i:05d}", queue_name, gpus, scheduler) for i in range(count)]


def distributed_job(
    name: str, queue_name: str, pods: int, gpus: int, scheduler: str, level: str | None = None
) -> list[Obj]:
    """KAI's createDistributedJobForKwok: the PodGroup, then its pods naming it."""
    members = [pod(f"{name}-{i:04d}", queue_name, gpus, scheduler, group=name) for i in range(pods)]
    return [pod_group(name, queue_name, pods, level), *members]
