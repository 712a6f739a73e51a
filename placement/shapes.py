"""What a pod asks of a node, reduced to what placement needs.

A ``TaskShape`` is hashable and shared by identical pods, so filter masks and
scores computed for one pod serve all pods of the same shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from kai_ray.model import AffinityTerm, GpuShare, Pod, ResourceVector, Toleration, mig_instances
from placement.dra_demand import ClaimDemand, ClaimSpec

CORE_COLUMNS = ("cpu", "memory", "gpu", "pods")
CPU, MEMORY, GPU, PODS = range(4)


@dataclass(frozen=True, slots=True)
class ResourceSchema:
    """Column layout of the resource arrays: the core four, then extended scalars by name."""

    scalars: tuple[str, ...] = ()

    @property
    def width(self) -> int:
        return len(CORE_COLUMNS) + len(self.scalars)

    def vector(self, amounts: ResourceVector) -> npt.NDArray[np.float64]:
        out = np.zeros(self.width)
        out[CPU], out[MEMORY], out[GPU], out[PODS] = amounts.cpu, amounts.memory, amounts.gpu, amounts.pods
        for name, value in amounts.scalars.items():
            if name in self.scalars:
                out[len(CORE_COLUMNS) + self.scalars.index(name)] = value
        return out

    def vector_from(self, values: npt.NDArray[np.float64], other: ResourceSchema) -> npt.NDArray[np.float64]:
        """A vector laid out for ``other`` re-laid for this schema (unknown scalars dropped)."""
        if other == self:
            return values
        out = np.zeros(self.width)
        out[: len(CORE_COLUMNS)] = values[: len(CORE_COLUMNS)]
        for j, name in enumerate(other.scalars):
            if name in self.scalars:
                out[len(CORE_COLUMNS) + self.scalars.index(name)] = values[len(CORE_COLUMNS) + j]
        return out

    def scalars_vector(self) -> ResourceVector:
        """A zero amount naming every extended resource of this schema."""
        return ResourceVector.of(scalars=dict.fromkeys(self.scalars, 1.0))

    @staticmethod
    def covering(vectors: Sequence[ResourceVector]) -> ResourceSchema:
        names: set[str] = set()
        for vector in vectors:
            names.update(vector.scalars)
        return ResourceSchema(tuple(sorted(names)))


@dataclass(frozen=True, slots=True)
class Constraints:
    """Where a pod may run regardless of capacity: selectors, affinity, tolerations."""

    node_selector: tuple[tuple[str, str], ...] = ()
    affinity: tuple[AffinityTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    # Shapes and constraints key every per-shape cache and are looked up many times per pod;
    # the hash of their nested tuples is worked out once, on first use. It never travels:
    # string hashes differ between processes, so unpickling builds the object anew.
    _hash: int | None = field(default=None, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        if self._hash is None:
            object.__setattr__(self, "_hash", hash((self.node_selector, self.affinity, self.tolerations)))
        return self._hash  # type: ignore[return-value]

    def __reduce__(self) -> tuple[type[Constraints], tuple[Any, ...]]:
        return Constraints, (self.node_selector, self.affinity, self.tolerations)

    @staticmethod
    def of_pod(pod: Pod, demand: ClaimDemand | None = None) -> Constraints:
        affinity = pod.affinity
        pin = demand.affinity() if demand is not None else ()
        if pin:  # allocated claims tie the pod to their node, on top of its own affinity
            affinity = tuple(term + pin for term in affinity) if affinity else (pin,)
        selector = tuple(sorted(pod.node_selector.items())) if pod.node_selector else ()
        return Constraints(selector, affinity, pod.tolerations)

    def matches_labels(self, labels: Mapping[str, str], node_name: str) -> bool:
        if any(labels.get(k) != v for k, v in self.node_selector):
            return False
        # Required node affinity: at least one term must match in full.
        return not self.affinity or any(all(req.matches(labels, node_name) for req in term) for term in self.affinity)


@dataclass(frozen=True, slots=True)
class TaskShape:
    """A pod's resource request and constraints. ``request`` excludes shared GPUs."""

    request: ResourceVector  # whole GPUs in .gpu; pods = 1
    share: GpuShare | None = None
    constraints: Constraints = Constraints()
    claims: tuple[ClaimSpec, ...] = ()  # DRA claims to allocate on the node (placement/dra_demand.py)
    legacy_mig: bool = False  # a legacy MIG pod (asks for MIG by annotation): no node takes it
    _hash: int | None = field(default=None, init=False, repr=False, compare=False)  # see Constraints

    def __hash__(self) -> int:
        if self._hash is None:
            object.__setattr__(
                self, "_hash", hash((self.request, self.share, self.constraints, self.claims, self.legacy_mig))
            )
        return self._hash  # type: ignore[return-value]

    def __reduce__(self) -> tuple[type[TaskShape], tuple[Any, ...]]:
        return TaskShape, (self.request, self.share, self.constraints, self.claims, self.legacy_mig)

    @staticmethod
    def of_pod(pod: Pod, demand: ClaimDemand | None = None) -> TaskShape:
        claims = demand.specs if demand is not None else ()
        legacy_mig = pod.legacy_mig is not None
        return TaskShape(pod.requests, pod.gpu_share, Constraints.of_pod(pod, demand), claims, legacy_mig)

    @property
    def wants_gpu(self) -> bool:
        """Whole GPUs, a shared GPU or MIG instances (KAI's IsRequireAnyKindOfGPU)."""
        return self.request.gpu > 0 or self.share is not None or bool(mig_instances(self.request.scalars))

    @property
    def needs_gpu_devices(self) -> bool:
        """Whole GPUs or a shared GPU: only a node with ``nvidia.com/gpu`` can take it."""
        return self.request.gpu > 0 or self.share is not None

    @property
    def is_cpu_only(self) -> bool:
        return not self.wants_gpu

    @property
    def is_best_effort(self) -> bool:
        """KAI: a pod that requests nothing always fits on idle capacity."""
        r = self.request
        return self.share is None and not (r.cpu or r.memory or r.gpu or r.scalars or self.claims)
