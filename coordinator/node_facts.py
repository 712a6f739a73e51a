"""What the session cache needs to know of the nodes, worked out again only when a node changes:
which are ready and what they hold together (the capacity the fair share divides), each node's
GPU memory, the distinct GPU memory sizes (KAI's per-node capacity predicate asks a GPU-memory
pod's queues a different portion on each) and the most GPUs any node has."""

from __future__ import annotations

from coordinator.cluster_model import ClusterModel
from kai_ray.model import mig_gpus


class NodeFacts:
    def __init__(self) -> None:
        self.version = -1  # the model's nodes_version these facts are of
        self.device_mib: dict[str, float] = {}  # node -> MiB per GPU
        self.ready: set[str] = set()  # ready nodes
        self.ready_total = [0.0, 0.0, 0.0]  # their allocatable GPU, CPU, memory
        self.gpu_memory_kinds: tuple[float, ...] = ()  # the distinct MiB per GPU, ascending
        self.largest_gpus = 0.0  # the most whole GPUs (nvidia.com/gpu) any node has

    def refresh(self, model: ClusterModel) -> bool:
        """Work the facts out again if any node changed since the last call; whether one did."""
        if self.version == model.nodes_version:
            return False
        largest = 0.0
        device_mib: dict[str, float] = {}
        ready: set[str] = set()
        gpu = cpu = memory = 0.0
        for name, node in model.nodes.items():  # one pass: this runs whenever any node changed
            allocatable, mib = node.allocatable, node.gpu_memory_mib
            device_mib[name] = mib
            largest = max(largest, allocatable.gpu)
            if node.ready:
                ready.add(name)
                gpu += allocatable.gpu + mig_gpus(allocatable.scalars)  # KAI counts MIG instances as GPUs
                cpu += allocatable.cpu
                memory += allocatable.memory
        self.gpu_memory_kinds = tuple(sorted(set(device_mib.values())))
        self.largest_gpus = largest
        self.device_mib, self.ready, self.ready_total = device_mib, ready, [gpu, cpu, memory]
        self.version = model.nodes_version
        return True
