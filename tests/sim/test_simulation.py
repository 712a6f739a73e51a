"""The simulator's accounting on small seeded runs: what it reports must add up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kai_ray.app.cli.main import main
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.app.sim.cluster import model_nodes
from kai_ray.app.sim.engine import InProcess, SimSettings, Simulation
from kai_ray.app.sim.run import SimulationRun
from kai_ray.app.sim.workload import generate
from kai_ray.config import SchedulerConfig
from kai_ray.model import Pod, PodState
from shards.shard import Shard

DOCUMENTED_KEYS = {  # simulate --json, docs/architecture.md#cli
    "nodes",
    "pods",
    "podsPerSecond",
    "sessionLatencyP99Seconds",
    "partialGangs",
    "gpuUtilization",
    "fairShareError",
    "rssBytes",
}
WALL_CLOCK_KEYS = {
    "podsPerSecond",
    "sessionLatencyP50Seconds",
    "sessionLatencyP99Seconds",
    "wallSeconds",
    "schedulerSeconds",
    "rssBytes",
    "setupSeconds",
    "metrics",
}


def simulate(nodes: int = 24, jobs: int = 60, hours: float = 3.0, seed: int = 5) -> Simulation:
    cluster = model_nodes(nodes, taint=True)
    workload = generate(sum(n.allocatable.gpu for n in cluster), seed, jobs=jobs, arrival_window=3600)
    simulation = Simulation(
        InProcess(in_process_coordinator(SchedulerConfig(), 1)), cluster, workload, SimSettings(horizon=hours * 3600)
    )
    simulation.run()
    return simulation


@pytest.fixture(scope="module")
def finished() -> Simulation:
    return simulate()


def test_no_gang_is_half_bound_and_no_node_is_over_committed(finished: Simulation) -> None:
    metrics = finished.metrics
    assert metrics.bound > 0 and metrics.cycle_walls
    assert metrics.partial_gangs == 0
    assert metrics.overcommits == []


def test_the_shards_usage_matches_a_recount_from_the_pods_after_every_cycle(finished: Simulation) -> None:
    assert finished.metrics.completed_jobs > 0  # finished pods turned Succeeded and had to be released
    assert finished.metrics.accounting_errors == []


def test_the_accounting_check_fails_a_scheduler_that_keeps_finished_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shards before the live loop kept the truth: a pod that turned Succeeded kept its hold."""

    def leaky_place(shard: Shard, pod: Pod) -> None:
        if pod.state in (PodState.SUCCEEDED, PodState.FAILED) and pod.key in shard.pods:
            return  # keeps holding what the finished pod held
        original(shard, pod)

    original = Shard._place_pod
    monkeypatch.setattr(Shard, "_place_pod", leaky_place)
    errors = simulate(jobs=30, hours=1.5).metrics.accounting_errors
    assert errors and "the scheduler holds" in errors[0] and "the pods on it hold" in errors[0]


def test_gpu_seconds_used_never_exceed_the_gpus_present(finished: Simulation) -> None:
    metrics = finished.metrics
    assert 0 < metrics.gpu_seconds_used <= metrics.gpu_seconds_capacity
    assert metrics.gpu_seconds_capacity == pytest.approx(metrics.gpu_capacity * metrics.simulated_seconds)
    assert all(0 <= utilization <= 1 + 1e-9 for _, utilization in metrics.timeline)


def test_every_pod_ends_completed_running_or_pending_with_a_reason(finished: Simulation) -> None:
    metrics = finished.metrics
    assert sum(metrics.end_states.values()) == metrics.pods_total
    assert set(metrics.end_states) <= {"Completed", "Running", "Releasing", "Pending", "NotArrived"}
    pending = [p for p in finished.pods.values() if p.state is PodState.PENDING]
    assert sum(metrics.pending_reasons.values()) == len(pending)
    assert all(reason and reason != "(no reason given)" for reason in metrics.pending_reasons)
    assert metrics.completed_jobs <= metrics.started_jobs <= metrics.jobs


def test_the_simulators_own_node_usage_matches_the_pods_it_holds(finished: Simulation) -> None:
    """Usage is kept incrementally; recomputed from scratch it must be the same."""
    used: dict[str, float] = {}
    for pod in finished.pods.values():
        if pod.state in (PodState.RUNNING, PodState.RELEASING) and pod.node:
            share = pod.gpu_share.fraction if pod.gpu_share and pod.gpu_share.fraction else 0.0
            used[pod.node] = used.get(pod.node, 0.0) + pod.requests.gpu + share * len(pod.gpu_groups)
    total = sum(used.values())
    assert finished.metrics.gpus_in_use == pytest.approx(total)
    for name, gpus in used.items():
        assert gpus <= finished.nodes[name].allocatable.gpu + 1e-9


def test_the_same_seed_gives_the_same_run_and_another_seed_another() -> None:
    def figures(simulation: Simulation) -> dict[str, object]:
        report = simulation.metrics.to_json(24, 1)
        return {k: v for k, v in report.items() if k not in WALL_CLOCK_KEYS}

    first, again = simulate(jobs=30, hours=1.5), simulate(jobs=30, hours=1.5)
    assert figures(first) == figures(again)
    assert figures(simulate(jobs=30, hours=1.5, seed=6)) != figures(first)


def test_the_cli_writes_the_report_json_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, plots = tmp_path / "report.json", tmp_path / "plots"
    code = main(
        [
            "simulate",
            "--nodes",
            "12",
            "--jobs",
            "20",
            "--hours",
            "1",
            "--shards",
            "1",
            "--no-progress",
            "--json",
            str(out),
            "--plot",
            str(plots),
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "partial gangs      0" in text and "GPU utilization" in text
    report = json.loads(out.read_text())
    assert set(report) >= DOCUMENTED_KEYS
    assert report["nodes"] == 12 and report["partialGangs"] == 0
    assert "scheduler_schedule_attempts_total" in report["metrics"]
    assert sorted(p.name for p in plots.iterdir()) == ["gpu-utilization.png", "queue-shares.png"]


@pytest.mark.parametrize(
    "flag, value", [("--nodes", "0"), ("--jobs", "-3"), ("--hours", "0"), ("--shards", "0"), ("--load", "0")]
)
def test_bad_sizes_are_one_line_errors(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", flag, value, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0]


@pytest.mark.usefixtures("ray_session")
def test_with_shard_actors_on_ray_the_run_keeps_its_invariants() -> None:
    outcome = SimulationRun(SchedulerConfig(), nodes=16, jobs=30, shards=2, seed=2, hours=1.0, progress=False).execute()
    metrics = outcome.metrics
    assert metrics.bound > 0 and metrics.partial_gangs == 0 and metrics.overcommits == []
    assert "coordinator + 2 shard actors on Ray" in outcome.text()
