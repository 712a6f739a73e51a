"""A cycle's time budget (sessionTimeBudget): past it, victim searches take no new job beyond the
first in fair order; the jobs not reached say why, lose nothing (no failed search, no pause) and
are searched next cycle."""

from __future__ import annotations

from coordinator.coordinator import Coordinator
from coordinator.results import CycleResult
from kai_ray.config import LIVE_SESSION_BUDGET, SchedulerConfig
from loadtests.contention import reclaim_storm
from loadtests.systems import in_process


def _storm_cycle(budget: float | None) -> tuple[Coordinator, CycleResult]:
    workload = reclaim_storm(nodes=4, jobs=20)
    coordinator = in_process(SchedulerConfig(sessionTimeBudget=budget))
    coordinator.apply(workload.cluster)
    coordinator.cycle(500.0, ("allocate",))
    coordinator.apply(workload.pending)
    return coordinator, coordinator.cycle(1_000.0, ("reclaim",))


def test_a_spent_budget_postpones_the_jobs_not_reached_to_the_next_cycle() -> None:
    coordinator, result = _storm_cycle(1e-9)  # spent before the first search
    # The first job in fair order is searched all the same (one victim): however long the rest of
    # a cycle takes, every cycle moves the storm on, so no queue starves.
    assert len(result.evictions) == 1
    decided = {key: d for key, d in result.decisions.pods.items() if key.startswith("bench/b-")}
    assert decided.pop("bench/b-000000-0").status == "Pipelined"
    assert len(decided) == 19 and all(d.status == "Pending" for d in decided.values())
    postponed = "victim searches: postponed to the next cycle: this cycle spent its time budget"
    assert all(postponed in d.reason for d in decided.values())
    assert not result.paused_jobs  # a postponed job is not a failed one
    again = coordinator.cycle(1_001.0, ("reclaim",))
    assert not again.stats.reused  # the same cluster, but the work is not done: a real session again
    assert len(again.evictions) == 1  # and the next job in fair order is searched


def test_without_a_budget_the_same_storm_is_decided_in_one_cycle() -> None:
    _, result = _storm_cycle(0.0)
    assert len(result.evictions) == 16  # half of 4 x 8 GPUs


def test_live_loops_bound_their_cycles_unless_the_config_says_otherwise() -> None:
    assert SchedulerConfig().sessionTimeBudget is None  # schedule and simulate: decisions never depend on speed
    assert SchedulerConfig().for_live_loop().sessionTimeBudget == LIVE_SESSION_BUDGET
    assert SchedulerConfig(sessionTimeBudget=0).for_live_loop().sessionTimeBudget == 0
    assert SchedulerConfig(sessionTimeBudget=3).for_live_loop().sessionTimeBudget == 3


def test_a_postponed_job_says_the_same_whichever_actions_did_not_reach_it() -> None:
    """In a storm, some cycles' later actions reach the deadline and some do not: the words
    must not depend on which, or every waiting pod's status is rewritten each cycle."""
    reasons = []
    for actions in (("reclaim",), ("reclaim", "preempt")):
        workload = reclaim_storm(nodes=4, jobs=20)
        coordinator = in_process(SchedulerConfig(sessionTimeBudget=1e-9))
        coordinator.apply(workload.cluster)
        coordinator.cycle(500.0, ("allocate",))
        coordinator.apply(workload.pending)
        reasons.append(coordinator.cycle(1_000.0, actions).decisions.pods["bench/b-000019-0"].reason)
    assert reasons[0] == reasons[1]
    assert reasons[0].count("postponed to the next cycle") == 1
