"""The ``big-gang`` scenario (docs/reservation-backfill.md): what it builds, without running it
(a run is minutes on two cores; docs/performance.md has its figures)."""

from __future__ import annotations

from kai_ray.app.cli.simulate_cmd import SCENARIO_NAMES
from kai_ray.app.sim import scenarios


def test_a_512_pod_gang_arrives_in_a_busy_1000_node_cluster_where_every_job_states_its_runtime() -> None:
    scenario = scenarios.big_gang(seed=3)
    assert len(scenario.nodes) == 1000
    gangs = [job for job in scenario.workload.jobs if job.pods == 512]
    assert [(g.name, g.min_member, g.arrival) for g in gangs] == [("big-gang", 512, scenarios.BIG_GANG_ARRIVAL)]
    jobs = scenario.workload.jobs
    assert all(job.expected_runtime is not None and job.expected_runtime >= job.duration for job in jobs)
    assert [job.arrival for job in jobs] == sorted(job.arrival for job in jobs)
    assert scenario.config.reservation is None, "with or without reservation is the user's --config"


def test_the_same_seed_builds_the_same_workload() -> None:
    assert scenarios.big_gang(seed=3).workload == scenarios.big_gang(seed=3).workload


def test_the_cli_offers_every_scenario() -> None:
    assert set(SCENARIO_NAMES) == set(scenarios.SCENARIOS)
