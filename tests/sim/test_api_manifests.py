"""What the simulator writes to its API server is what the scheduler reads back: a job's settings
must survive the manifest, or a simulation measures a cluster other than the one it describes."""

from __future__ import annotations

from dataclasses import replace

from kai_ray.app.sim.apiserver import pod_group_manifest
from kai_ray.app.sim.workload import JobSpec
from kai_ray.io.fields import ObjectReader
from kai_ray.io.parse_kai import parse_pod_group
from pod_grouper.pod_groups import RawPodGroup

GIB = 2**30


def spec(expected_runtime: float | None) -> JobSpec:
    return JobSpec(
        "job", "gpu", "team-a", 1, 1, 1.0, None, 8000, 32 * GIB, "train", 60.0, 900.0, expected_runtime=expected_runtime
    )


def read_back(job: JobSpec) -> RawPodGroup:
    return parse_pod_group(ObjectReader(pod_group_manifest(job.pod_group()), 0))


def test_a_jobs_expected_runtime_reaches_the_scheduler() -> None:
    # Reservations and backfill (and expectedRuntimeExceeded) read it off the PodGroup's annotation.
    for seconds in (1140.0, 4500.5, 1e9):
        assert read_back(spec(expected_runtime=seconds)).expected_runtime_seconds == seconds


def test_a_job_that_states_no_runtime_has_none() -> None:
    assert read_back(spec(expected_runtime=None)).expected_runtime_seconds is None


def test_a_jobs_preemptibility_set_apart_from_its_priority_reaches_the_scheduler() -> None:
    # A train-priority job is preemptible by its class; saying otherwise must survive the manifest.
    protected = replace(spec(expected_runtime=None), preemptible=False)
    assert read_back(protected).preemptibility == "non-preemptible"
    assert read_back(spec(expected_runtime=None)).preemptibility is None  # as its priority says
    exposed = replace(spec(expected_runtime=None), priority_class="build", preemptible=True)
    assert read_back(exposed).preemptibility == "preemptible"
