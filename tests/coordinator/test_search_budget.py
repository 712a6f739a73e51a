"""The victim search's scenario budget: it bounds each step of a job's search, not the whole
search, so a gang larger than the budget can still be made room for (as KAI, whose v0.12 search
has no bound, makes it)."""

from __future__ import annotations

from coordinator.coordinator import Coordinator
from coordinator.results import CycleResult
from coordinator.scheduler import run_session
from kai_ray.config import SchedulerConfig
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import ClusterSnapshot
from loadtests.systems import in_process
from tests.builders import JobSpec, build, config, node, queue

NOW = 1_000_000.0
NODES = 12


def full_cluster_and_a_big_gang() -> ClusterSnapshot:
    """Every node full with one of q1's whole-node jobs; q2, owed the whole cluster, wants a gang
    of one whole-node pod per node: each step of its search (one pod more) needs one victim."""
    return build(
        [node(f"n{i:02d}", gpu=8) for i in range(NODES)],
        [queue("q1", gpu_quota=0, created=0), queue("q2", gpu_quota=8 * NODES, created=1)],
        [JobSpec(f"hog{i:02d}", "q1", gpu=8, running_on=[f"n{i:02d}"], created=i) for i in range(NODES)]
        + [JobSpec("gang", "q2", pods=NODES, gpu=8, min_member=NODES, created=100)],
    )


def test_a_gang_with_more_pods_than_the_budget_per_job_gets_its_room() -> None:
    pods = run_session(full_cluster_and_a_big_gang(), config(maxScenariosPerJob=4), NOW, ["reclaim"]).pods
    assert [p.status for k, p in pods.items() if "gang" in k] == ["Pipelined"] * NODES
    assert sum(p.status == "Releasing" for p in pods.values()) == NODES


def test_a_spent_action_budget_starts_no_other_search_but_finishes_the_one_started() -> None:
    snapshot = full_cluster_and_a_big_gang()
    pods = run_session(snapshot, config(maxScenariosPerAction=1), NOW, ["reclaim"]).pods
    assert [p.status for k, p in pods.items() if "gang" in k] == ["Pipelined"] * NODES


def _cycles_until_decided(
    budget: float, actions: tuple[str, ...] | None = ("reclaim",)
) -> tuple[list[CycleResult], Coordinator]:
    coordinator = in_process(SchedulerConfig(sessionTimeBudget=budget))
    coordinator.apply(ClusterDeltas.of_snapshot(full_cluster_and_a_big_gang()))
    results = [coordinator.cycle(NOW, actions)]
    while not results[-1].evictions and len(results) < 3 * NODES:
        results.append(coordinator.cycle(NOW + len(results), actions))  # a second apart
    return results, coordinator


def test_a_gang_search_past_the_time_budget_goes_on_next_cycle_from_where_it_stopped() -> None:
    unbounded, _ = _cycles_until_decided(0.0)
    assert len(unbounded) == 1
    # Spent before the search starts: every cycle takes one step (room for one pod more).
    stepped, coordinator = _cycles_until_decided(1e-9)
    assert len(stepped) == NODES
    gang = "default/gang-0"
    first = stepped[0].decisions.pods[gang]
    assert first.status == "Pending"
    assert f"reclaim is still looking for room for its {NODES} pods" in first.reason
    assert stepped[-2].decisions.pods[gang].reason == first.reason  # the pods' status is not rewritten each cycle
    assert not any(r.evictions for r in stepped[:-1]) and not stepped[0].paused_jobs  # nothing counted against it
    # The last cycle decides what the unbounded search decided at once.
    assert sorted(e.pod for e in stepped[-1].evictions) == sorted(e.pod for e in unbounded[0].evictions)
    placed = {k: (d.status, d.node) for k, d in stepped[-1].decisions.pods.items() if "gang" in k}
    assert placed == {k: (d.status, d.node) for k, d in unbounded[0].decisions.pods.items() if "gang" in k}
    assert not len(coordinator.paused_searches)


def test_a_stopped_search_is_not_held_back_by_another_actions_failed_search(searches: list[tuple[str, str]]) -> None:
    """With every action: preempt's search for the gang (after reclaim's, in KAI's order) fails;
    the failure must not back the job off (ten seconds and more) while reclaim's search is under
    way, and the other actions leave the job to that search."""
    stepped, _ = _cycles_until_decided(1e-9, None)
    assert len(stepped) == NODES
    assert all(not r.paused_jobs for r in stepped)
    assert searches == [("reclaim", "default/gang")] * NODES


def test_a_paused_search_whose_victim_moved_starts_over() -> None:
    stepped, coordinator = _cycles_until_decided(1e-9)
    assert len(stepped) == NODES  # as above; now stop one half-way and change a recorded victim
    coordinator = in_process(SchedulerConfig(sessionTimeBudget=1e-9))
    snapshot = full_cluster_and_a_big_gang()
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    for i in range(3):
        coordinator.cycle(NOW + i, ("reclaim",))
    victim = next(p for p in snapshot.pods if p.node == f"n{NODES - 1:02d}")  # the first recorded
    coordinator.apply(ClusterDeltas(pods_removed=(victim.key,)))
    coordinator.cycle(NOW + 3, ("reclaim",))
    assert coordinator.paused_searches.steps_done("reclaim", "default/gang") == 1  # started over
