"""What the session cache needs to know of the nodes, worked out again only when a node changes:
which are ready and what they hold together (the capacity the fair share divides), each node's
GPU memory, the smallest GPU (KAI counts GPU-memory requests in its units) and the most GPUs
any node has."""

from __future__ import annotations

import math

from coordinator.cluster_model import ClusterModel

DEFAULT_GPU_MEMORY_MIB = 100.0  # a node's GPU memory when it says none


class NodeFacts:
    def __init__(self) -> None:
        self.version = -1  # the model's nodes_version these facts are of
        self.device_mib: dict[str, float] = {}  # node -> MiB per GPU
        self.ready: set[str] = set()  # ready nodes
        self.ready_total = [0.0, 0.0, 0.0]  # their allocatable GPU, CPU, memory
        self.min_gpu_memory = DEFAULT_GPU_MEMORY_MIB  # MiB of the smallest GPU
        self.largest_gpus = 0.0  # the most GPUs any node has

    def refresh(self, model: ClusterModel) -> bool:
        """Work the facts out again if any node changed since the last call; whether one did."""
        if self.version == model.nodes_version:
            return False
        smallest = math.inf
        largest = 0.0
        device_mib: dict[str, float] = {}
        ready: set[str] = set()
        gpu = cpu = memory = 0.0
        for name, node in model.nodes.items():  # one pass: this runs whenever any node changed
            allocatable, mib = node.allocatable, node.gpu_memory_mib
            device_mib[name] = mib
            largest = max(largest, allocatable.gpu)
            if allocatable.gpu > 0 and mib < smallest:
                smallest = mib
            if node.ready:
                ready.add(name)
                gpu += allocatable.gpu
                cpu += allocatable.cpu
                memory += allocatable.memory
        self.min_gpu_memory = smallest if smallest != math.inf else DEFAULT_GPU_MEMORY_MIB
        self.largest_gpus = largest
        self.device_mib, self.ready, self.ready_total = device_mib, ready, [gpu, cpu, memory]
        self.version = model.nodes_version
        return True
