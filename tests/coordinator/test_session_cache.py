"""A coordinator that keeps its session state across cycles decides what a fresh one would.

Cycle after cycle on random clusters: the watch confirms some binds (and reports others
failed), pods finish, new jobs arrive, pod groups change, and then the long-lived
coordinator (tasks, jobs and queue sums kept from earlier cycles, cycles with nothing new
skipped) must decide exactly what a coordinator that has never run decides on the same
cluster: the one it believes in, assumed binds included.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterable
from dataclasses import replace
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.actions.victims import SortedJobs, VictimLists, VictimPool, pending_pool
from coordinator.coordinator import Coordinator
from coordinator.results import CycleResult
from coordinator.session import SessionState
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import ClusterSnapshot, PodGroup, PodState
from tests.builders import JobSpec, build, config
from tests.coordinator.random_clusters import NOW, clusters
from tests.coordinator.test_properties import ACTIONS, comparable

CYCLES = 6


def _fresh_decides(coordinator: Coordinator, now: float, shards: int, actions: tuple[str, ...]) -> object:
    fresh = in_process_coordinator(config(), shards)
    fresh.apply(ClusterDeltas.of_snapshot(coordinator.model.snapshot()))
    fresh.search_backoff = copy.deepcopy(coordinator.search_backoff)  # which victim searches wait
    return _outcome(fresh.cycle(now, actions))


def _outcome(result: CycleResult) -> object:
    """What a cycle tells the adapter: decisions, binds, each pod's job and queue, the gangs
    still short of pods, and the pod groups whose clocks to write."""
    return (
        comparable(result.decisions),
        sorted((b.pod, b.node) for b in result.binds),
        result.pod_jobs,
        result.pod_queues,
        result.not_ready_jobs,
        result.job_clocks,
    )


def _changes(rng: random.Random, coordinator: Coordinator, cycle: int, bound: list[str]) -> ClusterDeltas:
    """What a cluster reports between two cycles."""
    pods = coordinator.model.pods
    confirmed, failed = [], []
    for key in bound:
        pod = pods.get(key)
        if pod is None:
            continue
        if rng.random() < 0.8:
            confirmed.append(replace(pod, state=PodState.RUNNING))
        else:
            failed.append(key)
    deleted = [key for key in failed if rng.random() < 0.3]  # deleted while its bind was in flight
    if deleted and rng.random() < 0.5:  # the watch brings the deletion before the bind's failure
        coordinator.apply(ClusterDeltas(pods_removed=tuple(deleted)))
    if failed:
        coordinator.bind_failed(failed)
    running = sorted(k for k, p in pods.items() if p.state is PodState.RUNNING)
    gone = tuple(rng.sample(running, min(len(running), rng.randint(0, 2)))) + tuple(deleted)
    waiting = sorted(k for k, p in pods.items() if p.state is PodState.PENDING)
    if waiting and rng.random() < 0.3:  # deleted while it waits: what its searches evicted stays
        gone += (rng.choice(waiting),)
    groups = sorted(coordinator.model.pod_groups.values(), key=lambda g: g.key)
    changed_group: tuple[PodGroup, ...] = ()
    if groups and rng.random() < 0.5:
        group = rng.choice(groups)
        changed_group = (replace(group, priority=group.priority + rng.choice((-10, 10))),)
    queues = [g.queue for g in groups] or ["q0"]
    late = [
        JobSpec(f"late{cycle}-{i}", rng.choice(queues), gpu=1, created=NOW + cycle) for i in range(rng.randint(0, 2))
    ]
    arrivals = build([], [], late)
    return ClusterDeltas(
        pods_upserted=tuple(confirmed) + arrivals.pods,
        pods_removed=gone,
        pod_groups_upserted=changed_group + arrivals.pod_groups,
    )


# Without victim searches most cycles never look at every node's row, so the long-lived
# coordinator reads only what changed (the model's change log) and resets only what the last
# session moved: the path where forgetting one reset would show.
CALM_ACTIONS = ("allocate", "stalegangeviction")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(clusters(), st.integers(0, 2**16), st.sampled_from((1, 2)), st.sampled_from((ACTIONS, CALM_ACTIONS)))
def test_a_long_lived_coordinator_decides_as_a_fresh_one(
    snapshot: ClusterSnapshot, seed: int, shards: int, actions: tuple[str, ...]
) -> None:
    rng = random.Random(seed)
    coordinator = in_process_coordinator(config(), shards)
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    for cycle in range(CYCLES):
        now = NOW + 10 * cycle
        expected = _fresh_decides(coordinator, now, shards, actions)
        result = coordinator.cycle(now, actions)
        assert _outcome(result) == expected, cycle
        coordinator.apply(_changes(rng, coordinator, cycle, [b.pod for b in result.binds]))


def _sorted(index: SortedJobs) -> dict[str, list[str]]:
    return {queue: [entry[2].key for entry in entries] for queue, entries in index.by_queue().items()}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(clusters(), st.integers(0, 2**16))
def test_victim_lists_carried_across_cycles_equal_lists_built_afresh(snapshot: ClusterSnapshot, seed: int) -> None:
    """Each victim search's lists of running and pending jobs, carried over from earlier actions
    and cycles with only the jobs changed since re-placed, equal lists sorted from scratch, also
    when cycles without a victim search come between."""
    carried = VictimLists.for_session
    checked: list[int] = []

    def checking(lists: VictimLists, state: SessionState, changed: Iterable[str]) -> tuple[VictimPool, SortedJobs]:
        pool, pending = carried(lists, state, changed)
        assert _sorted(pool.jobs) == _sorted(VictimPool.sorted_jobs(state))
        assert _sorted(pending) == _sorted(pending_pool(state))
        checked.append(1)
        return pool, pending

    rng = random.Random(seed)
    coordinator = in_process_coordinator(config(), 1)
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    with mock.patch.object(VictimLists, "for_session", checking):
        for cycle in range(CYCLES):
            # Some cycles run no victim search: the lists must not miss what changed meanwhile.
            result = coordinator.cycle(NOW + 10 * cycle, rng.choice((ACTIONS, ACTIONS, CALM_ACTIONS)))
            coordinator.apply(_changes(rng, coordinator, cycle, [b.pod for b in result.binds]))
