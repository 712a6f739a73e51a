"""Resource quantities as the scheduler counts them.

Units are fixed so that every number can go straight into a numpy column:
cpu in millicores, memory in bytes, gpu in devices (fractions allowed for
queue accounting), pods as a count. Other extended resources (``example.com/fpga``,
MIG profiles, ...) are carried by name in ``scalars``; where KAI counts MIG instances as GPUs,
``kai_ray.model.mig`` says how many.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

GPU_RESOURCE = "nvidia.com/gpu"
# Resources that have their own column; everything else is an extended scalar.
CORE_RESOURCES = ("cpu", "memory", GPU_RESOURCE, "pods")
# The three resources that queues divide (KAI's proportion plugin).
QUEUE_RESOURCES = ("gpu", "cpu", "memory")

_EMPTY: Mapping[str, float] = MappingProxyType({})


def _frozen(values: Mapping[str, float] | None) -> Mapping[str, float]:
    if not values:
        return _EMPTY
    return MappingProxyType({k: float(v) for k, v in sorted(values.items()) if v})


@dataclass(frozen=True, slots=True)
class ResourceVector:
    """An amount of node resources: what a node offers or what a pod asks for."""

    cpu: float = 0.0  # millicores
    memory: float = 0.0  # bytes
    gpu: float = 0.0  # whole devices
    pods: float = 0.0
    scalars: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    # Vectors key per-shape caches; the hash is worked out once, on first use. It never travels
    # between processes (string hashes differ there): unpickling builds the vector anew.
    _hash: int | None = field(default=None, init=False, repr=False, compare=False)

    @staticmethod
    def of(
        cpu: float = 0.0,
        memory: float = 0.0,
        gpu: float = 0.0,
        pods: float = 0.0,
        scalars: Mapping[str, float] | None = None,
    ) -> ResourceVector:
        return ResourceVector(float(cpu), float(memory), float(gpu), float(pods), _frozen(scalars))

    def __hash__(self) -> int:
        if self._hash is None:
            object.__setattr__(
                self, "_hash", hash((self.cpu, self.memory, self.gpu, self.pods, tuple(self.scalars.items())))
            )
        return self._hash  # type: ignore[return-value]

    def __reduce__(self) -> tuple[type[ResourceVector], tuple[float, float, float, float, Mapping[str, float]]]:
        return ResourceVector, (self.cpu, self.memory, self.gpu, self.pods, self.scalars)

    def __add__(self, other: ResourceVector) -> ResourceVector:
        merged = dict(self.scalars)
        for name, value in other.scalars.items():
            merged[name] = merged.get(name, 0.0) + value
        return ResourceVector.of(
            self.cpu + other.cpu,
            self.memory + other.memory,
            self.gpu + other.gpu,
            self.pods + other.pods,
            merged,
        )

    def __sub__(self, other: ResourceVector) -> ResourceVector:
        merged = dict(self.scalars)
        for name, value in other.scalars.items():
            merged[name] = merged.get(name, 0.0) - value
        return ResourceVector.of(
            self.cpu - other.cpu,
            self.memory - other.memory,
            self.gpu - other.gpu,
            self.pods - other.pods,
            merged,
        )


ZERO = ResourceVector()


@dataclass(frozen=True, slots=True)
class GpuShare:
    """A request for part of a GPU (KAI's GPU sharing).

    Exactly one of ``fraction`` (portion of one device, in (0, 1]) and
    ``memory_mib`` (GPU memory, converted to a portion on the chosen node) is set;
    ``devices`` is how many devices get that portion (``gpu-fraction-num-devices``).
    """

    fraction: float | None = None
    memory_mib: int | None = None
    devices: int = 1

    def portion_on(self, device_memory_mib: float) -> float:
        """The portion of one device this request takes on a node whose GPUs have
        ``device_memory_mib`` each."""
        if self.fraction is not None:
            return self.fraction
        assert self.memory_mib is not None
        if device_memory_mib <= 0:
            return 1.0
        return min(1.0, self.memory_mib / device_memory_mib)

    def accepted_portion(self, device_memory_mib: float) -> float:
        """The portion of each device a placed pod received (KAI rounds a memory request up to
        hundredths of the node's device memory); what ``GPU_PORTION`` tells the pod."""
        if self.fraction is not None:
            return self.fraction
        assert self.memory_mib is not None
        if device_memory_mib <= 0:
            return 1.0
        return math.ceil(self.memory_mib / device_memory_mib * 100) / 100

    def quota_gpus(self, reference_memory_mib: float) -> float:
        """What the request counts against queue GPU quota (devices × portion)."""
        return self.devices * self.portion_on(reference_memory_mib)


@dataclass(frozen=True, slots=True)
class QueueQuantities:
    """A (gpu, cpu, memory) triple in queue units: devices, millicores, bytes."""

    gpu: float = 0.0
    cpu: float = 0.0
    memory: float = 0.0

    def __add__(self, other: QueueQuantities) -> QueueQuantities:
        return QueueQuantities(self.gpu + other.gpu, self.cpu + other.cpu, self.memory + other.memory)

    def __sub__(self, other: QueueQuantities) -> QueueQuantities:
        return QueueQuantities(self.gpu - other.gpu, self.cpu - other.cpu, self.memory - other.memory)
