"""What victims give back to the reclaim rules (KAI's proportion validator)."""

from __future__ import annotations

from coordinator.jobs import Job, PodSet
from coordinator.reclaim_rules import victim_chunks
from coordinator.tasks import DEFAULT_SUBGROUP, Status, Task
from kai_ray.model import Pod, PodGroup, ResourceVector
from placement.shapes import TaskShape


def _job(name: str, queue: str, statuses: list[Status], minimum: int = 1) -> tuple[Job, list[Task]]:
    tasks = []
    for i, status in enumerate(statuses):
        pod = Pod("default", f"{name}-{i}", requests=ResourceVector.of(cpu=1000, memory=2**30, gpu=1, pods=1))
        tasks.append(Task(pod, TaskShape.of_pod(pod), status, "n0", accepted=(1.0, 1000.0, 2.0**30)))
    group = PodGroup("default", name, queue, 50, True, min_member=minimum)
    job = Job(group, queue, {DEFAULT_SUBGROUP: PodSet(DEFAULT_SUBGROUP, minimum, tasks)}, True, 50)
    return job, tasks


def test_a_victim_that_only_moves_leaves_its_queue_out() -> None:
    moved, moved_tasks = _job("moved", "q1", [Status.PIPELINED])
    evicted, evicted_tasks = _job("evicted", "q2", [Status.RELEASING, Status.RELEASING], minimum=1)
    jobs = {moved.key: moved, evicted.key: evicted}
    chunks = victim_chunks({moved.key: moved_tasks, evicted.key: evicted_tasks}, jobs, ignore_moved=True)
    assert set(chunks) == {"q2"}  # KAI skips a victim with nothing given back: no rules for q1
    assert len(chunks["q2"]) == 2  # the pod above the minimum on its own, the gang's pod on its own
    # without consolidating reclaim a moved pod gives back what it held
    assert set(victim_chunks({moved.key: moved_tasks}, jobs, ignore_moved=False)) == {"q1"}
