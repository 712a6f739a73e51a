"""Properties of DRA scheduling on random clusters: no device goes to two claims, and no GPU
is counted twice toward a queue, whatever mix of private, shared and already-allocated claims,
gangs and queues the cluster holds; and the answer does not depend on the number of shards."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.coordinator import CycleResult
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.config import SchedulerConfig
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import (
    ClaimAllocation,
    ClusterSnapshot,
    Device,
    DeviceClass,
    DeviceRequest,
    DeviceResult,
    DraObjects,
    Node,
    Pod,
    PodClaim,
    PodGroup,
    PodState,
    Queue,
    QueueResource,
    ResourceClaim,
    ResourceSlice,
    ResourceVector,
)

DRIVER = "gpu.nvidia.com"
QUEUES = ("q1", "q2")
UNLIMITED = QueueResource(-1, 1, -1)
CLASSES = (
    DeviceClass("gpu.nvidia.com", (f"device.driver == '{DRIVER}'",)),
    DeviceClass("low-gpu", (f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].index < 2",)),
)


@dataclass(frozen=True)
class Cluster:
    snapshot: ClusterSnapshot
    queue_of: dict[str, str]  # pod -> queue


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    node_count = draw(st.integers(1, 4))
    devices: dict[str, list[Device]] = {}
    nodes, slices = [], []
    for n in range(node_count):
        name = f"n{n}"
        nodes.append(Node(name, ResourceVector.of(cpu=64000, memory=2**38, pods=110)))
        listed = [Device(DRIVER, name, f"gpu-{i}", ((DRIVER, "index", i),)) for i in range(draw(st.integers(0, 4)))]
        devices[name] = listed
        slices.append(ResourceSlice(f"{name}-gpus", DRIVER, name, name, tuple(listed)))
    free = {n: list(d) for n, d in devices.items()}
    claims: list[ResourceClaim] = []
    pods: list[Pod] = []
    groups: list[PodGroup] = []
    queue_of: dict[str, str] = {}
    for c in range(draw(st.integers(0, 6))):
        queue = draw(st.sampled_from(QUEUES))
        count = draw(st.integers(1, 3))
        device_class = draw(st.sampled_from(CLASSES)).name
        users = draw(st.integers(1, 3))  # pods that name the claim (more than one: shared)
        allocation = None
        running_on = None
        if draw(st.booleans()):  # allocated before the session, used by a running pod
            fitting = [n for n, left in free.items() if len(left) >= count]
            if fitting:
                running_on = draw(st.sampled_from(sorted(fitting)))
                taken, free[running_on] = free[running_on][:count], free[running_on][count:]
                allocation = ClaimAllocation(
                    running_on, tuple(DeviceResult("r", DRIVER, running_on, d.name) for d in taken)
                )
        claims.append(
            ResourceClaim(
                "ns",
                f"c{c}",
                f"uid-c{c}",
                (DeviceRequest("r", device_class, (), "ExactCount", count),),
                allocation,
                labels=(("kai.scheduler/queue", queue),),
            )
        )
        priority = draw(st.sampled_from((50, 75, 125)))  # preemptible below 100
        group = PodGroup("ns", f"g{c}", queue, priority, priority < 100, min_member=draw(st.integers(1, users)))
        groups.append(group)
        for u in range(users):
            name = f"c{c}-p{u}"
            running = running_on is not None and u == 0
            pods.append(
                Pod(
                    "ns",
                    name,
                    uid=name,
                    state=PodState.RUNNING if running else PodState.PENDING,
                    node=running_on if running else None,
                    requests=ResourceVector.of(cpu=100, memory=2**20, pods=1),
                    pod_group=group.name,
                    resource_claims=(PodClaim("gpu", f"c{c}"),),
                )
            )
            queue_of[f"ns/{name}"] = queue
    queues = (Queue("root", gpu=UNLIMITED, cpu=UNLIMITED, memory=UNLIMITED),) + tuple(
        Queue(q, "root", gpu=UNLIMITED, cpu=UNLIMITED, memory=UNLIMITED) for q in QUEUES
    )
    snapshot = ClusterSnapshot(
        tuple(nodes), tuple(pods), tuple(groups), queues, dra=DraObjects(tuple(slices), CLASSES, tuple(claims))
    )
    return Cluster(snapshot, queue_of)


def run(cluster: Cluster, shards: int = 1, actions: tuple[str, ...] = ("allocate",)) -> CycleResult:
    config = SchedulerConfig.model_validate({"actions": list(actions), "kValue": 0})
    coordinator = in_process_coordinator(config, shards)
    coordinator.apply(ClusterDeltas.of_snapshot(cluster.snapshot))
    return coordinator.cycle(1000.0)


@settings(max_examples=60, deadline=None)
@given(clusters())
def test_no_device_is_ever_allocated_to_two_claims(cluster: Cluster) -> None:
    result = run(cluster)
    owner: dict[str, str] = {}
    on_node = {s.node: {d.key for d in s.devices} for s in cluster.snapshot.dra.slices}
    for claim in cluster.snapshot.dra.claims:
        for device in claim.allocation.results if claim.allocation else ():
            assert owner.setdefault(device.key, claim.key) == claim.key
    granted: set[str] = set()
    for bind in result.binds:
        for grant in bind.claims:
            assert grant.claim not in granted, f"claim {grant.claim} allocated twice"
            granted.add(grant.claim)
            assert grant.allocation.node == bind.node
            for device in grant.allocation.results:
                assert device.key in on_node[bind.node], "a device of another node"
                assert owner.setdefault(device.key, grant.claim) == grant.claim, f"{device.key} given twice"


ALL_ACTIONS = ("allocate", "consolidation", "reclaim", "preempt")


@settings(max_examples=80, deadline=None)
@given(clusters(), st.sampled_from([("allocate",), ALL_ACTIONS]))
def test_no_gpu_is_counted_twice_toward_a_queue(cluster: Cluster, actions: tuple[str, ...]) -> None:
    """A queue's GPUs are its claims that some pod of it uses (runs, binds or waits pipelined on),
    each once: whatever allocate placed and whatever reclaim or preempt evicted."""
    result = run(cluster, actions=actions)
    using = {k for k, d in result.decisions.pods.items() if d.status in ("Running", "Binding", "Pipelined")}
    expected = dict.fromkeys(QUEUES, 0.0)
    for claim in cluster.snapshot.dra.claims:
        users = [
            p for p in cluster.snapshot.pods if p.key in using and any(c.claim == claim.name for c in p.resource_claims)
        ]
        if users:  # counted once, for its queue, however many pods use it
            expected[cluster.queue_of[users[0].key]] += claim.gpus
    for queue in QUEUES:
        assert result.decisions.queues[queue]["allocated"]["gpu"] == expected[queue]


@settings(max_examples=25, deadline=None)
@given(clusters())
def test_claims_get_the_same_devices_with_any_number_of_shards(cluster: Cluster) -> None:
    one, three = run(cluster, 1), run(cluster, 3)
    assert {p: d.status for p, d in one.decisions.pods.items()} == {
        p: d.status for p, d in three.decisions.pods.items()
    }
    assert {b.pod: b.claims for b in one.binds} == {b.pod: b.claims for b in three.binds}
