"""The pods a job places next, real or simulated, asked in the order the actions ask them: the
real answer may reuse the simulated one only where the two must agree."""

from __future__ import annotations

from coordinator.jobs import Job
from coordinator.session_open import open_session
from coordinator.statement import Statement
from coordinator.tasks import Status, Task
from tests.builders import JobSpec, build, config, node, queue

NOW = 1_000_000.0


def _elastic_job_with_an_evicted_pod() -> tuple[Job, Task]:
    snapshot = build(
        [node("n0", gpu=4), node("n1", gpu=4)],
        [queue("q", gpu_quota=8)],
        [JobSpec("elastic", "q", pods=3, min_member=1, running_on=["n0"])],
    )
    state = open_session(snapshot, config(), NOW)
    stmt = Statement(state.table, state.queues, state.jobs_by_task)
    job = state.jobs["default/elastic"]
    (running,) = [t for t in job.tasks if t.status is Status.RUNNING]
    stmt.evict(running, "reclaim", None)
    return job, running


def test_a_real_placement_never_takes_a_pod_evicted_in_the_session() -> None:
    job, evicted = _elastic_job_with_an_evicted_pod()
    simulated = job.tasks_to_allocate(real=False)  # asked first, as the job order does
    assert evicted in simulated  # a simulation may move the evicted pod back
    real = job.tasks_to_allocate(real=True)
    assert real and all(task.status is Status.PENDING for task in real)
    assert real == job._tasks_to_allocate(True)


def test_the_real_answer_is_the_simulated_one_when_it_holds_only_pending_pods() -> None:
    snapshot = build([node("n0", gpu=4)], [queue("q", gpu_quota=8)], [JobSpec("gang", "q", pods=3, min_member=2)])
    job = open_session(snapshot, config(), NOW).jobs["default/gang"]
    simulated = job.tasks_to_allocate(real=False)
    assert len(simulated) == 2
    assert job.tasks_to_allocate(real=True) == simulated == job._tasks_to_allocate(True)
