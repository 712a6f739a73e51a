"""The invariants of docs/architecture.md#invariants, checked on a session's decisions against its input snapshot.

Everything is recomputed here from the snapshot's pods (their requests, states and
nodes) and the decided status, node and GPU groups of each pod; nothing is read from the
scheduler's own arrays, so a bookkeeping error there cannot hide a broken decision.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from coordinator.decisions import Decisions
from coordinator.tasks import pod_order_key
from kai_ray.model import ClusterSnapshot, Pod, PodGroup, PodState, Queue

EPSILON = 1e-6
HOLDING_STATES = (PodState.RUNNING, PodState.BINDING, PodState.RELEASING)
PLACED = ("Running", "Binding", "Pipelined")
EVICTING_ACTIONS = ("consolidation", "reclaim", "preempt")
KAI_SCHEDULER = "kai-scheduler"


def check_decisions(snapshot: ClusterSnapshot, decisions: Decisions, retried: frozenset[str] = frozenset()) -> None:
    """Every invariant that one session's output must satisfy on its own. ``retried``: pod groups
    whose bind the shards refused, so they are pending again although they made room."""
    assert set(decisions.pods) == {p.key for p in snapshot.pods}, "every pod of the snapshot gets a decision"
    check_no_node_overcommitted(snapshot, decisions)
    check_gangs_all_or_nothing(snapshot, decisions)
    check_queue_limits(snapshot, decisions)
    check_evictions(snapshot, decisions, retried)


# ---------------------------------------------------------------- 1. capacity
@dataclass
class _NodeUse:
    """One view of a node (now, or once releasing pods are gone): what is held on it."""

    cpu: float = 0.0
    memory: float = 0.0
    whole_gpus: float = 0.0
    pods: int = 0
    shared: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # gpu group -> portion

    def add(self, pod: Pod, groups: tuple[str, ...]) -> None:
        self.cpu += pod.requests.cpu
        self.memory += pod.requests.memory
        self.whole_gpus += pod.requests.gpu
        self.pods += 1
        if pod.gpu_share is not None:
            assert pod.gpu_share.fraction is not None, "the generator only makes fraction requests"
            assert len(groups) == pod.gpu_share.devices, f"{pod.key} sits on {groups}, wants {pod.gpu_share.devices}"
            for group in groups:
                self.shared[group] += pod.gpu_share.fraction


def check_no_node_overcommitted(snapshot: ClusterSnapshot, decisions: Decisions) -> None:
    """Now: running, binding and terminating pods fit. Later: running, binding and pipelined pods fit
    (pipelined pods wait for the terminating ones). Shared GPUs count as whole devices while used."""
    now: dict[str, _NodeUse] = defaultdict(_NodeUse)
    later: dict[str, _NodeUse] = defaultdict(_NodeUse)
    for pod in snapshot.pods:
        decided = decisions.pods[pod.key]
        held_before = pod.state in HOLDING_STATES and pod.node is not None
        if held_before:
            assert pod.node is not None
            now[pod.node].add(pod, pod.gpu_groups)  # eviction does not free anything in this instant
        if decided.status in ("Running", "Binding"):
            assert decided.node is not None, f"{pod.key} is {decided.status} without a node"
            if decided.status == "Binding" and not held_before:
                now[decided.node].add(pod, decided.gpu_groups)
            later[decided.node].add(pod, decided.gpu_groups)
        elif decided.status == "Pipelined":
            assert decided.node is not None, f"{pod.key} is Pipelined without a node"
            later[decided.node].add(pod, decided.gpu_groups)
    for node in snapshot.nodes:
        for view, use in (("now", now[node.name]), ("once releasing pods are gone", later[node.name])):
            where = f"node {node.name} {view}"
            alloc = node.allocatable
            assert use.cpu <= alloc.cpu + EPSILON, f"{where}: cpu {use.cpu} > {alloc.cpu}"
            assert use.memory <= alloc.memory + EPSILON, f"{where}: memory {use.memory} > {alloc.memory}"
            reservation_pods = sum(1 for portion in use.shared.values() if portion > 0)  # one per shared GPU
            assert use.pods + reservation_pods <= alloc.pods + EPSILON, (
                f"{where}: {use.pods} pods and {reservation_pods} GPU reservation pods > {alloc.pods}"
            )
            for group, portion in use.shared.items():
                assert portion <= 1.0 + EPSILON, f"{where}: shared GPU {group} holds {portion} of a device"
            devices = use.whole_gpus + sum(1 for portion in use.shared.values() if portion > 0)
            assert devices <= alloc.gpu + EPSILON, f"{where}: {devices} GPUs in use of {alloc.gpu}"


# ---------------------------------------------------------------- 2. gangs
def check_gangs_all_or_nothing(snapshot: ClusterSnapshot, decisions: Decisions) -> None:
    """A pod group that got new pods this session has at least minMember placed, in every sub-group."""
    for group, pods in _members(snapshot).items():
        newly = [p.key for p in pods if p.state is PodState.PENDING and decisions.pods[p.key].status in PLACED]
        if not newly:
            continue
        placed = [p for p in pods if decisions.pods[p.key].status in PLACED]
        assert len(placed) >= group.min_member, (
            f"{group.key}: {len(placed)} of minMember {group.min_member} placed, new: {newly}"
        )
        for sub in group.sub_groups:
            count = sum(1 for p in placed if p.subgroup == sub.name)
            assert count >= sub.min_member, f"{group.key}/{sub.name}: {count} of minMember {sub.min_member} placed"


def _members(snapshot: ClusterSnapshot) -> dict[PodGroup, list[Pod]]:
    groups = {g.key: g for g in snapshot.pod_groups}
    out: dict[PodGroup, list[Pod]] = {g: [] for g in snapshot.pod_groups}
    for pod in snapshot.pods:
        group = groups.get(f"{pod.namespace}/{pod.pod_group}") if pod.pod_group else None
        if group is not None and pod.scheduler_name == KAI_SCHEDULER:
            out[group].append(pod)
    return out


# ---------------------------------------------------------------- 4. queues
def check_queue_limits(snapshot: ClusterSnapshot, decisions: Decisions) -> None:
    """After the last placement into a queue's subtree the queue is within its limit (KAI checks the
    limit when it places, at every level); the same for non-preemptible work and the queue's quota.
    A queue already over its limit in the input may stay over only if nothing was placed under it.
    A semi-preemptible group's non-preemptible work is its core: per sub-group, the first minMember
    of its placed pods in task order."""
    queues = {q.name: q for q in snapshot.queues}
    allocated: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    allocated_np: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    placed_into: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    placed_np_into: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for group, pods in _members(snapshot).items():
        path = _path(queues, group.queue)
        if not path or any(q.parent == path[0].name for q in snapshot.queues):
            continue  # a missing or non-leaf queue: its pods never get placed, checked elsewhere
        core = {p.key for p in _core(group, pods, decisions)} if group.semi_preemptible else set()
        for pod in pods:
            decided = decisions.pods[pod.key]
            if decided.status not in PLACED:
                continue
            amounts = _queue_amounts(pod)
            newly = decided.status in ("Binding", "Pipelined")
            protected = pod.key in core if group.semi_preemptible else not group.preemptible
            for queue in path:
                _add(allocated[queue.name], amounts)
                if newly:
                    _add(placed_into[queue.name], amounts)
                if protected:
                    _add(allocated_np[queue.name], amounts)
                    if newly:
                        _add(placed_np_into[queue.name], amounts)
    for queue in snapshot.queues:
        for r, name in enumerate(("gpu", "cpu", "memory")):
            resource = queue.resource(name)
            if resource.limit != -1 and placed_into[queue.name][r] > 0:
                assert allocated[queue.name][r] <= resource.limit + EPSILON, (
                    f"queue {queue.name}: {name} allocated {allocated[queue.name][r]} over limit {resource.limit}"
                )
            if resource.quota != -1 and placed_np_into[queue.name][r] > 0:
                assert allocated_np[queue.name][r] <= resource.quota + EPSILON, (
                    f"queue {queue.name}: non-preemptible {name} {allocated_np[queue.name][r]} "
                    f"over quota {resource.quota}"
                )


def _pod_sets(group: PodGroup, pods: list[Pod]) -> dict[str, tuple[int, list[Pod]]]:
    """Pod set name -> its minimum and its pods, as a session makes them."""
    minimum = {s.name: s.min_member for s in group.sub_groups} or {"default": max(group.min_member, 1)}
    out: dict[str, tuple[int, list[Pod]]] = {name: (m, []) for name, m in minimum.items()}
    for pod in pods:
        name = pod.subgroup if pod.subgroup in minimum else "default"
        out.setdefault(name or "default", (0, []))[1].append(pod)
    return out


def _core(group: PodGroup, pods: list[Pod], decisions: Decisions) -> list[Pod]:
    """The first minMember placed pods of each pod set, in KAI's task order."""
    out: list[Pod] = []
    for minimum, members in _pod_sets(group, pods).values():
        placed = sorted((p for p in members if decisions.pods[p.key].status in PLACED), key=pod_order_key)
        out.extend(placed[:minimum])
    return out


def _path(queues: dict[str, Queue], leaf: str) -> list[Queue]:
    out = []
    name: str | None = leaf
    while name is not None and name in queues:
        out.append(queues[name])
        name = queues[name].parent
    return out


def _queue_amounts(pod: Pod) -> tuple[float, float, float]:
    gpu = pod.requests.gpu
    if pod.gpu_share is not None and pod.gpu_share.fraction is not None:
        gpu += pod.gpu_share.devices * pod.gpu_share.fraction
    return gpu, pod.requests.cpu, pod.requests.memory


def _add(total: list[float], amounts: tuple[float, float, float]) -> None:
    for i, amount in enumerate(amounts):
        total[i] += amount


# ---------------------------------------------------------------- 6. evictions
def check_evictions(snapshot: ClusterSnapshot, decisions: Decisions, retried: frozenset[str] = frozenset()) -> None:
    """Only preemptible pods lose their place (stale gangs aside), each eviction names a preemptor
    that got pods placed in this session, and consolidation only moves pods."""
    pods = {p.key: p for p in snapshot.pods}
    groups = {g.key: g for g in snapshot.pod_groups}
    actions: dict[str, list[str]] = defaultdict(list)
    for key, action, preemptor in decisions.evictions:
        actions[key].append(action)
        pod = pods[key]
        group = groups[f"{pod.namespace}/{pod.pod_group}"]
        if action == "stalegangeviction":
            continue
        assert action in EVICTING_ACTIONS, action
        assert group.preemptible or group.semi_preemptible, f"{action} evicted {key} of non-preemptible {group.key}"
        assert preemptor is not None and preemptor in groups, f"{action} evicted {key} for no job"
        winner = groups[preemptor]
        assert preemptor in retried or _placed_in_session(snapshot, decisions, winner), (
            f"{key} evicted for {preemptor}, never placed"
        )
        if action == "preempt":
            assert winner.queue == group.queue and winner.priority > group.priority, (
                f"preempt: {preemptor} ({winner.queue}, {winner.priority}) took from {key} "
                f"({group.queue}, {group.priority})"
            )
        if action == "reclaim":
            assert winner.queue != group.queue, f"reclaim inside queue {group.queue}: {preemptor} took from {key}"
    for key, decided in decisions.pods.items():
        pod = pods[key]
        if pod.state is PodState.PENDING and decided.status not in ("Pending", "Binding", "Pipelined"):
            # KAI's victims are jobs with allocated pods, those placed earlier in the session included
            assert decided.status == "Releasing" and actions[key], f"pending {key} ended {decided.status}"
        if pod.state not in (PodState.RUNNING, PodState.BINDING):
            continue
        lost_place = decided.status in ("Releasing", "Pipelined")  # Pipelined: evicted, then placed again
        assert lost_place == bool(actions[key]), f"{key}: {pod.state} -> {decided.status}, evictions {actions[key]}"
        if actions[key] and actions[key][-1] == "consolidation":
            assert decided.status == "Pipelined", f"consolidation left {key} {decided.status}, not moved"
    check_semi_preemptible_minimum(snapshot, decisions, actions)


def check_semi_preemptible_minimum(
    snapshot: ClusterSnapshot, decisions: Decisions, actions: dict[str, list[str]]
) -> None:
    """Reclaim, preempt and consolidation take only a semi-preemptible group's pods beyond its
    minimum: a pod set they took pods from keeps minMember of the pods it ran when the session
    opened (all of them, if it ran fewer) running where they ran."""
    for group, pods in _members(snapshot).items():
        if not group.semi_preemptible:
            continue
        for name, (minimum, members) in _pod_sets(group, pods).items():
            taken = [p.key for p in members if any(a in EVICTING_ACTIONS for a in actions[p.key])]
            if not taken:
                continue
            ran = [p for p in members if p.state in (PodState.RUNNING, PodState.BINDING)]
            kept = [p for p in ran if decisions.pods[p.key].status == p.state.value and not actions[p.key]]
            assert len(kept) >= min(minimum, len(ran)), (
                f"{group.key}/{name}: {taken} taken, {len(kept)} of minMember {minimum} kept running"
            )


def _placed_in_session(snapshot: ClusterSnapshot, decisions: Decisions, group: PodGroup) -> bool:
    """The group got pods placed: they are still placed, or a later action evicted them again."""
    evicted = {key for key, _, _ in decisions.evictions}
    return any(
        p.state is PodState.PENDING and (decisions.pods[p.key].status in ("Binding", "Pipelined") or p.key in evicted)
        for p in _members(snapshot)[group]
    )
