"""ResourceClaims inside a session: which claims a pod allocates, who uses each, GPU quota.

KAI's ``dynamicresources`` plugin, in kai-ray's terms:

- *PreFilter.* A pod whose claim does not exist yet (its template's claim not made), names a
  missing DeviceClass, is reserved for 256 pods already, or is a shared GPU claim without the
  job's queue label (KAI's rule for claims several pods share) cannot be placed; the reason
  names the claim.
- *Filter.* An allocated claim ties the pod to the claim's node; an unallocated one must be
  allocatable from the node's free devices (the shards' ``DeviceBook``).
- *Allocate / deallocate.* Placing a pod allocates its unallocated claims on the node's
  devices and makes it a user of every claim it names; evicting it takes it off; a claim
  nobody uses any more is deallocated (virtually: its devices are free for the session).
- *Quota.* The GPUs a claim asks for (requests of a class whose name contains "gpu":
  ExactCount's count, All as one) count toward the queue's GPU quota and fair share, charged
  to the pod that allocates the claim. A claim shared by several pods is charged once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from kai_ray.model import ClaimAllocation, DeviceClass, DeviceResult, DraObjects, Node, Pod, ResourceClaim
from placement.dra_demand import ClaimDemand, claim_demand, claim_key
from placement.dra_devices import Allocation, DeviceBook, Held
from placement.placer import Choice

MAX_CONSUMERS = 256  # resource.k8s.io's limit on status.reservedFor
Undo = Callable[[], None]


@dataclass(frozen=True, slots=True)
class ClaimGrant:
    """A claim a bind allocates: what the binder writes into its status."""

    claim: str  # namespace/name
    allocation: ClaimAllocation


@dataclass(slots=True)
class DraView:
    claims: dict[str, ResourceClaim] = field(default_factory=dict)
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    gpu_devices: float = 0.0  # DRA GPUs on ready nodes: KAI adds them to the cluster's GPUs

    def __bool__(self) -> bool:
        return bool(self.claims or self.classes or self.gpu_devices)

    @staticmethod
    def of(objects: DraObjects, nodes: Iterable[Node]) -> DraView:
        ready = {n.name for n in nodes if n.ready}
        gpus = sum(len(s.devices) for s in objects.slices if s.node in ready and "gpu" in s.driver.lower())
        return DraView({c.key: c for c in objects.claims}, {c.name: c for c in objects.classes}, float(gpus))

    def demand(self, pod: Pod, book: DeviceBook | None = None) -> ClaimDemand:
        if not pod.resource_claims:
            return ClaimDemand()
        return claim_demand(pod, self.claims, self.classes, book.overrides if book is not None else None)

    def problem(self, pod: Pod, queue: str, queue_label: str, book: DeviceBook | None = None) -> str | None:
        """Why the pod cannot be placed at all (KAI's PreFilter), or None."""
        demand = self.demand(pod, book)
        if demand.problem:
            return demand.problem
        for pod_claim in pod.resource_claims:
            claim = self.claims.get(claim_key(pod, pod_claim.claim or ""))
            if claim is None:
                continue
            if claim.unsupported and claim.allocation is None:
                fields = ", ".join(claim.unsupported)
                return f"ResourceClaim {claim.name} uses {fields}, which kai-ray does not honour yet"
            if len(claim.reserved_for) >= MAX_CONSUMERS and pod.name not in claim.reserved_for:
                return f"ResourceClaim {claim.name} is already reserved for {MAX_CONSUMERS} pods"
            if pod_claim.template is None and claim.owner_pod is None and claim.gpus:
                label = claim.label(queue_label)
                if label != queue:
                    return (
                        f"ResourceClaim {claim.name} is a shared GPU claim and needs the label "
                        f"{queue_label}={queue} (it has {label or 'none'})"
                    )
        return None

    def users(self, pods: Iterable[Pod], active: Callable[[Pod], bool]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for pod in pods:
            if not active(pod):
                continue
            for pod_claim in pod.resource_claims:
                if pod_claim.claim is not None:
                    out.setdefault(claim_key(pod, pod_claim.claim), set()).add(pod.key)
        return out

    def charged_gpus(self, pod: Pod, users: Mapping[str, set[str]]) -> float:
        """GPUs of allocated claims charged to this (placed) pod: each claim to its first user."""
        total = 0.0
        for pod_claim in pod.resource_claims:
            key = claim_key(pod, pod_claim.claim or "")
            claim = self.claims.get(key)
            holders = users.get(key)
            if claim is not None and claim.allocation is not None and holders and min(holders) == pod.key:
                total += claim.gpus
        return total


def grants_of(demand: ClaimDemand, node: str, devices: Allocation | None) -> tuple[ClaimGrant, ...]:
    if devices is None:
        return ()
    grants = []
    for key, picked in zip(demand.keys, devices, strict=True):
        results = tuple(DeviceResult(name, d.driver, d.pool, d.name) for name, d in picked)
        grants.append(ClaimGrant(key, ClaimAllocation(node, results)))
    return tuple(grants)


def place_claims(book: DeviceBook, pod_key: str, node: str, choice: Choice, demand: ClaimDemand) -> Undo:
    """Allocate the claims ``demand`` lists on ``choice.devices``, and make the pod a user of
    every claim it names; returns the undo."""
    taken: list[str] = []
    previous = {k: book.overrides.get(k) for k in demand.keys}
    if choice.devices is not None:
        for key, picked in zip(demand.keys, choice.devices, strict=True):
            problem = book.take(key, [d.key for _, d in picked], choice.node)
            assert not problem, problem  # the placer chose free devices of this very book
            taken.append(key)
            book.overrides[key] = (True, node)
    joined = [*demand.keys, *demand.joins]
    payers = {k: book.payer.get(k) for k in joined}
    for key in joined:
        if key in demand.keys or not book.users.get(key):  # allocated by it, or nobody pays yet
            book.payer[key] = pod_key
        book.users.setdefault(key, set()).add(pod_key)

    def undo() -> None:
        for key in joined:
            book.users.get(key, set()).discard(pod_key)
            paid_by = payers[key]
            if paid_by is None:
                book.payer.pop(key, None)
            else:
                book.payer[key] = paid_by
        for key in reversed(taken):
            book.release(key)
            before = previous[key]
            if before is None:
                book.overrides.pop(key, None)
            else:
                book.overrides[key] = before

    return undo


def evict_claims(book: DeviceBook, pod: Pod) -> tuple[Undo, list[tuple[str, float]]]:
    """The pod stops using its claims; a claim left without users is deallocated, and one still
    used whose GPUs the pod paid for is charged to another user instead. Returns the undo and
    those charges: (new payer, GPUs)."""
    freed: list[tuple[str, Held | None, tuple[bool, str | None] | None]] = []
    used: list[str] = []
    moved: list[tuple[str, str]] = []  # claim, the payer it had (this pod)
    charges: list[tuple[str, float]] = []
    for pod_claim in pod.resource_claims:
        if pod_claim.claim is None:
            continue
        key = claim_key(pod, pod_claim.claim)
        users = book.users.get(key)
        if users is None or pod.key not in users:
            continue
        users.discard(pod.key)
        used.append(key)
        if users and book.payer.get(key) == pod.key:
            book.payer[key] = min(users)
            moved.append((key, pod.key))
            charges.append((book.payer[key], book.claim_gpus.get(key, 0.0)))
        if not users:
            held = book.release(key)
            freed.append((key, held, book.overrides.get(key)))
            book.overrides[key] = (False, None)
            for device in held.keys if held is not None else ():
                book.releasing[device] = book.releasing.get(device, 0) + 1

    def undo() -> None:
        for key, held, before in reversed(freed):
            if held is not None:
                for device in held.keys:
                    book.releasing[device] -= 1
                    if not book.releasing[device]:
                        del book.releasing[device]
                book.take(key, held.keys, held.row)
            if before is None:
                book.overrides.pop(key, None)
            else:
                book.overrides[key] = before
        for key in used:
            book.users.setdefault(key, set()).add(pod.key)
        for key, payer in moved:
            book.payer[key] = payer

    return undo, charges
