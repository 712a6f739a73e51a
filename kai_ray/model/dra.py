"""Dynamic Resource Allocation (``resource.k8s.io``) as the scheduler sees it.

Drivers publish the devices of each node in ResourceSlices; a DeviceClass names a kind of
device with CEL selectors; a ResourceClaim asks for devices (requests, each of a class,
with more CEL selectors) and, once allocated, names the exact devices and the node they are
on. A pod refers to claims by name, or to a ResourceClaimTemplate from which Kubernetes
creates a claim for that pod alone. These records are what the readers produce from the
``resource.k8s.io/v1`` objects (v1beta1/v1beta2 shapes are read too).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# An attribute value as a slice publishes it: bool, int, string or a version (kept as "v:1.2.3").
AttrValue = bool | int | str
ALL_DEVICES = "All"
EXACT_COUNT = "ExactCount"


@dataclass(frozen=True, slots=True)
class Device:
    driver: str
    pool: str
    name: str
    attributes: tuple[tuple[str, str, AttrValue], ...] = ()  # (domain, name, value), domain qualified
    capacity: tuple[tuple[str, str, float], ...] = ()  # (domain, name, amount in base units)
    # driver/pool/name, made once: the allocator's search looks it up millions of times a session.
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.driver}/{self.pool}/{self.name}")


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    node: str | None  # the node the devices are on; None for devices no single node owns
    devices: tuple[Device, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()  # CEL expressions every device of the class satisfies
    extended_resource_name: str | None = None
    # spec.config as canonical JSON: opaque driver parameters the allocator copies into every
    # allocation of the class (source FromClass); the scheduler never reads them.
    config_json: str = "[]"

    @property
    def counts_as_gpu(self) -> bool:
        """KAI counts devices of a class whose name contains "gpu" as GPUs toward queue quota."""
        return "gpu" in self.name.lower()


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    device_class: str = ""
    selectors: tuple[str, ...] = ()
    mode: str = EXACT_COUNT  # ExactCount | All
    count: int = 1
    alternatives: tuple[DeviceRequest, ...] = ()  # firstAvailable: the first that can be met is used

    @property
    def gpus(self) -> int:
        """What the request counts toward GPU quota (KAI: ExactCount's count, All counts as one)."""
        if self.alternatives:
            return self.alternatives[0].gpus
        if "gpu" not in self.device_class.lower():
            return 0
        return self.count if self.mode == EXACT_COUNT else 1


@dataclass(frozen=True, slots=True)
class DeviceResult:
    request: str  # the request (or "request/subrequest") the device serves
    driver: str
    pool: str
    device: str

    @property
    def key(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True, slots=True)
class ClaimAllocation:
    node: str | None  # where the devices are (the allocation's node selector); None: any node
    results: tuple[DeviceResult, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    namespace: str
    name: str
    uid: str = ""
    requests: tuple[DeviceRequest, ...] = ()
    allocation: ClaimAllocation | None = None
    reserved_for: tuple[str, ...] = ()  # names of the pods it is reserved for
    labels: tuple[tuple[str, str], ...] = ()
    owner_pod: str | None = None  # a claim made from a template for one pod: that pod's name
    # Fields of the claim that kai-ray's allocator does not honour yet (paths, e.g.
    # "spec.devices.constraints"): such a claim is never allocated by kai-ray, only waits.
    unsupported: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def gpus(self) -> int:
        return sum(r.gpus for r in self.requests)

    def label(self, key: str) -> str | None:
        return dict(self.labels).get(key)


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One entry of ``pod.spec.resourceClaims``: a claim by name, or made from a template (its
    generated name comes from ``pod.status.resourceClaimStatuses`` once Kubernetes made it)."""

    name: str
    claim: str | None = None
    template: str | None = None


@dataclass(frozen=True, slots=True)
class DraObjects:
    slices: tuple[ResourceSlice, ...] = ()
    classes: tuple[DeviceClass, ...] = ()
    claims: tuple[ResourceClaim, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.slices or self.classes or self.claims)


@dataclass(frozen=True, slots=True)
class DraChanges:
    """DRA objects that changed, batched like the rest of ``ClusterDeltas``."""

    slices_upserted: tuple[ResourceSlice, ...] = ()
    slices_removed: tuple[str, ...] = ()
    classes_upserted: tuple[DeviceClass, ...] = ()
    classes_removed: tuple[str, ...] = ()
    claims_upserted: tuple[ResourceClaim, ...] = ()
    claims_removed: tuple[str, ...] = ()  # "namespace/name"

    def __bool__(self) -> bool:
        return bool(
            self.slices_upserted
            or self.slices_removed
            or self.classes_upserted
            or self.classes_removed
            or self.claims_upserted
            or self.claims_removed
        )

    @staticmethod
    def of_objects(objects: DraObjects) -> DraChanges:
        return DraChanges(
            slices_upserted=objects.slices, classes_upserted=objects.classes, claims_upserted=objects.claims
        )
