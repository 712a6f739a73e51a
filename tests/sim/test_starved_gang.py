"""The ``starved-gang`` scenario (docs/reservation-backfill.md): a gang that never starts on a
cluster kept full by small jobs, unless it may reserve nodes.

The runs here are a small version (48 nodes, a 64-pod gang, every runtime a quarter of the full
scenario's, one queue so that no victim search costs the test its seconds); the full scenario and
its figures are ``python -m loadtests.starved_gang`` and docs/performance.md."""

from __future__ import annotations

from kai_ray.app.runtime import in_process_coordinator
from kai_ray.app.sim import scenarios
from kai_ray.app.sim.engine import InProcess, SimSettings, Simulation
from kai_ray.app.sim.starved_gang import GANG_QUEUE, StarvedGang
from kai_ray.config import SchedulerConfig

SMALL = StarvedGang(nodes=48, gang_pods=64, gang_arrival=300.0, hours=0.5, time_scale=0.25, teams=1)
SEED = 2
GANG = "big-gang"


def simulate(config: SchedulerConfig, reasons: list[str] | None = None) -> Simulation:
    """The small scenario under ``config``; ``reasons`` collects the gang's pending reason of every cycle."""
    scenario = scenarios.starved_gang(SEED, SMALL)
    coordinator = InProcess(in_process_coordinator(config, 1))
    settings = SimSettings(horizon=SMALL.hours * 3600)
    simulation = Simulation(coordinator, scenario.nodes, scenario.workload, settings)

    def gang_reason(now: float) -> None:
        result = simulation.last_result
        decision = result.decisions.pods.get(f"sim/{GANG}-0") if result is not None else None
        if reasons is not None and decision is not None and decision.reason:
            reasons.append(decision.reason)

    simulation.on_step = gang_reason
    simulation.run()
    return simulation


def test_without_reservations_the_gang_waits_for_capacity_that_small_jobs_keep_taking() -> None:
    simulation = simulate(SchedulerConfig())
    metrics = simulation.metrics
    full = [utilization for t, utilization in metrics.timeline if t >= SMALL.gang_arrival]
    assert min(full) > 0.9, "the cluster is full for the whole wait: nothing idles while the gang waits"
    assert simulation.jobs[GANG].first_start is None
    reason = next(why for job, _, why in metrics.waiting_jobs if job == GANG)
    # It waits on GPUs (not on a quota, a limit or a bug), and reclaim may not take them for it.
    assert "are required for gang scheduling" in reason and "didn't have enough resources: GPUs" in reason
    assert f"queue {GANG_QUEUE} cannot reclaim: it would go above its fair share" in reason
    small = [run for name, run in simulation.jobs.items() if name != GANG and run.spec.arrival >= SMALL.gang_arrival]
    assert sum(run.first_start is not None for run in small) > 10, "small jobs that came later started meanwhile"
    assert metrics.partial_gangs == 0 and not metrics.overcommits and not metrics.accounting_errors


def test_with_reservations_the_gang_starts_on_the_nodes_it_held() -> None:
    reasons: list[str] = []
    simulation = simulate(SchedulerConfig.model_validate({"reservation": {"after": "2m", "minPods": 32}}), reasons)
    started = simulation.jobs[GANG].first_start
    assert started is not None and started < SMALL.hours * 3600
    holding = [why for why in reasons if "holds a reservation" in why]
    assert holding, "while it waited, the gang said it held nodes"
    # The nodes it held run jobs that state their runtime, so it knows when it will start (and
    # small jobs that end before then may backfill them).
    assert all("projected start 1970-01-01T" in why for why in holding), holding[0]
    metrics = simulation.metrics
    assert metrics.partial_gangs == 0 and not metrics.overcommits and not metrics.accounting_errors


def test_the_full_scenario_is_a_512_pod_gang_among_small_jobs_on_1000_nodes() -> None:
    scenario = scenarios.starved_gang(seed=1)
    assert len(scenario.nodes) == 1000
    jobs = scenario.workload.jobs
    (gang,) = (job for job in jobs if job.pods > 1)
    assert (gang.name, gang.pods, gang.min_member, gang.gpus, gang.queue) == (GANG, 512, 512, 1, GANG_QUEUE)
    small = [job for job in jobs if job is not gang]
    assert {job.gpus for job in small} == {1, 2, 4, 8}
    stated = sum(job.expected_runtime is not None for job in small) / len(small)
    assert 0.7 < stated < 0.8, "most small jobs state a runtime, some do not"
    assert all(job.expected_runtime is None or job.expected_runtime >= job.duration for job in small)
    assert {q.name for q in scenario.workload.queues} == {"team-a", "team-b"}
    assert scenario.config.reservation is None, "with or without reservation is the user's --config"
    assert scenarios.starved_gang(seed=1).workload == scenario.workload


def test_a_non_preemptible_gang_that_started_on_its_reservation_keeps_its_run() -> None:
    """Two teams: once up, the gang takes its team above its fair share. As a preemptible job the
    other team's reclaim may take it down again (on these seeds it does, KAI's rules); said
    non-preemptible, it is within its team's quota, no reclaim takes it, and it finishes."""
    config = SchedulerConfig.model_validate({"reservation": {"after": "2m", "minPods": 16}})
    for seed in (1, 3):
        size = StarvedGang(
            nodes=24, gang_pods=32, gang_arrival=300.0, hours=1.0, time_scale=0.25, teams=2, gang_preemptible=False
        )
        scenario = scenarios.starved_gang(seed, size)
        simulation = Simulation(
            InProcess(in_process_coordinator(config, 1)),
            scenario.nodes,
            scenario.workload,
            SimSettings(horizon=size.hours * 3600),
        )
        simulation.run()
        run = simulation.jobs[GANG]
        assert run.first_start is not None and run.epoch == 0 and run.finished_at is not None
        metrics = simulation.metrics
        assert metrics.partial_gangs == 0 and not metrics.overcommits and not metrics.accounting_errors
