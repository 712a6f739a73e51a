"""Semi-preemptible jobs: reclaim, preempt and consolidation take only the pods beyond a job's
minimum, and only the minimum counts against the queue's quota as non-preemptible work.

Each case would go the other way if the job were treated as preemptible (its minimum would be
taken) or as non-preemptible (its surplus would be kept, or counted against the quota)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from coordinator.decisions import PodDecision
from coordinator.scheduler import run_session
from coordinator.session_open import open_session
from coordinator.session_queues import queue_state_of
from coordinator.statement import Statement
from coordinator.tasks import Status
from kai_ray.model import ClusterSnapshot
from placement.placer import Choice
from tests.builders import JobSpec, build, config, node, queue

NOW = 1_000_000.0


def decide(snapshot: ClusterSnapshot, actions: list[str]) -> dict[str, PodDecision]:
    return run_session(snapshot, config(), NOW, actions).pods


def statuses(pods: dict[str, PodDecision], job: str, count: int) -> list[str]:
    return [pods[f"default/{job}-{i}"].status for i in range(count)]


def started_in_order(snapshot: ClusterSnapshot, job: str) -> ClusterSnapshot:
    """The job's pods created one minute apart, pod 0 first: the newest pods come last in KAI's
    task order, so they are the surplus that goes first."""
    pods = tuple(
        replace(p, created=NOW - 3600 + 60 * int(p.name.rsplit("-", 1)[1])) if p.pod_group == job else p
        for p in snapshot.pods
    )
    return replace(snapshot, pods=pods)


def serving(pods: int, minimum: int, on: list[str], queue_name: str = "team-a", gpu: int = 1) -> JobSpec:
    """An inference service: ``minimum`` replicas protected, the rest bursting."""
    return JobSpec("serve", queue_name, pods=pods, gpu=gpu, min_member=minimum, running_on=on, semi_preemptible=True)


# ------------------------------------------------------------------ reclaim
def test_reclaim_takes_only_the_newest_pods_beyond_the_minimum() -> None:
    snapshot = started_in_order(
        build(
            [node("n", gpu=4)],
            [queue("team-a", gpu_quota=2), queue("team-b", gpu_quota=2, created=1)],
            [serving(4, 2, ["n"] * 4), JobSpec("train", "team-b", gpu=2, created=10)],
        ),
        "serve",
    )
    pods = decide(snapshot, ["reclaim"])
    assert statuses(pods, "serve", 4) == ["Running", "Running", "Releasing", "Releasing"]
    assert pods["default/train-0"].status == "Pipelined"


def test_reclaim_leaves_the_protected_pods_running_and_says_why_the_reclaimer_waits() -> None:
    # team-a's quota was lowered to 1 under a service running one pod beyond its minimum of 2;
    # team-b deserves 2 GPUs and wants both. The one surplus pod is not enough, and the minimum
    # stays even over quota (KAI's design); a preemptible job in its place loses its pods.
    snapshot = build(
        [node("n", gpu=3)],
        [queue("team-a", gpu_quota=1), queue("team-b", gpu_quota=2, created=1)],
        [serving(3, 2, ["n"] * 3), JobSpec("train", "team-b", gpu=2, created=10)],
    )
    pods = decide(snapshot, ["reclaim"])
    assert statuses(pods, "serve", 3) == ["Running"] * 3
    assert pods["default/train-0"].status == "Pending"
    assert "semi-preemptible, whose pods up to minMember are protected" in pods["default/train-0"].reason

    as_preemptible = build(
        [node("n", gpu=3)],
        [queue("team-a", gpu_quota=1), queue("team-b", gpu_quota=2, created=1)],
        [
            JobSpec("serve", "team-a", pods=3, min_member=2, running_on=["n"] * 3, preemptible=True),
            JobSpec("train", "team-b", gpu=2, created=10),
        ],
    )
    assert decide(as_preemptible, ["reclaim"])["default/train-0"].status == "Pipelined"


def test_protected_pods_within_quota_are_not_reclaimed_another_job_goes_instead() -> None:
    # team-a runs 4 GPUs on a quota of 2: a batch job and, newer (the first victim), a service at
    # its minimum of 2. As a preemptible job the service would be the one reclaimed.
    def cluster(serve: JobSpec) -> ClusterSnapshot:
        return build(
            [node("n", gpu=4)],
            [queue("team-a", gpu_quota=2), queue("team-b", gpu_quota=2, created=1)],
            [
                JobSpec("batch", "team-a", pods=2, running_on=["n"] * 2, created=1),
                serve,
                JobSpec("train", "team-b", gpu=2, created=10),
            ],
        )

    pods = decide(cluster(replace(serving(2, 2, ["n"] * 2), created=2)), ["reclaim"])
    assert statuses(pods, "serve", 2) == ["Running", "Running"]
    assert statuses(pods, "batch", 2) == ["Releasing", "Releasing"]
    assert pods["default/train-0"].status == "Pipelined"

    preemptible = JobSpec("serve", "team-a", pods=2, running_on=["n"] * 2, created=2, preemptible=True)
    pods = decide(cluster(preemptible), ["reclaim"])
    assert statuses(pods, "serve", 2) == ["Releasing", "Releasing"]


# ------------------------------------------------------------------ preempt
def test_preempt_takes_only_pods_beyond_the_minimum() -> None:
    snapshot = started_in_order(
        build(
            [node("n", gpu=4)],
            [queue("team-a", gpu_quota=4)],
            [serving(4, 2, ["n"] * 4), JobSpec("urgent", "team-a", gpu=2, priority=80, created=10)],
        ),
        "serve",
    )
    pods = decide(snapshot, ["preempt"])
    assert statuses(pods, "serve", 4) == ["Running", "Running", "Releasing", "Releasing"]
    assert pods["default/urgent-0"].status == "Pipelined"


def test_preempt_that_would_need_protected_pods_takes_nothing_and_says_so() -> None:
    snapshot = build(
        [node("n", gpu=4)],
        [queue("team-a", gpu_quota=4)],
        [serving(4, 3, ["n"] * 4), JobSpec("urgent", "team-a", gpu=2, priority=80, created=10)],
    )
    pods = decide(snapshot, ["preempt"])
    assert statuses(pods, "serve", 4) == ["Running"] * 4
    reason = pods["default/urgent-0"].reason
    assert "preempt: no lower-priority job of queue team-a it may take makes room for it" in reason
    assert "semi-preemptible" in reason


# ------------------------------------------------------------------ consolidation
def test_consolidation_moves_a_pod_beyond_the_minimum_but_never_one_of_the_minimum() -> None:
    cluster = ([node("n1", gpu=4), node("n2", gpu=4)], [queue("team-a", gpu_quota=8)])
    big = JobSpec("big", "team-a", gpu=4, created=10)
    # The pod on n2 is the third, beyond the minimum of 2: moving it to n1 frees n2.
    movable = started_in_order(build(*cluster, [serving(3, 2, ["n1", "n1", "n2"]), big]), "serve")
    pods = decide(movable, ["consolidation"])
    assert statuses(pods, "serve", 3) == ["Running", "Running", "Pipelined"]
    assert pods["default/serve-2"].node == "n1" and pods["default/big-0"].node == "n2"
    # Here n2 holds a protected pod (the second): nothing may free it.
    kept = started_in_order(build(*cluster, [serving(3, 2, ["n1", "n2", "n2"]), big]), "serve")
    pods = decide(kept, ["consolidation"])
    assert statuses(pods, "serve", 3) == ["Running"] * 3
    assert pods["default/big-0"].status == "Pending"


# ------------------------------------------------------------------ quota
def test_pods_beyond_the_minimum_may_go_over_quota_the_minimum_may_not() -> None:
    fits = build([node("n", gpu=4)], [queue("team-a", gpu_quota=2)], [serving(4, 2, [])])
    assert statuses(decide(fits, ["allocate"]), "serve", 4) == ["Binding"] * 4

    too_big = build([node("n", gpu=4)], [queue("team-a", gpu_quota=2)], [serving(4, 3, [])])
    pods = decide(too_big, ["allocate"])
    assert statuses(pods, "serve", 4) == ["Pending"] * 4
    assert pods["default/serve-0"].reason == (
        "NonPreemptibleOverQuota: semi-preemptible job's protected minimum (its first 3 pods) would take "
        "queue team-a over its gpu quota: quota 2, non-preemptible allocated 0, requested 3"
    )


def test_only_the_minimum_counts_against_the_quota_of_non_preemptible_work() -> None:
    # 4 pods run, 2 protected: the queue holds 2 GPUs of non-preemptible work out of a quota of 3.
    snapshot = build(
        [node("n", gpu=8)],
        [queue("team-a", gpu_quota=3)],
        [
            serving(4, 2, ["n"] * 4),
            JobSpec("build-two", "team-a", gpu=2, priority=100, created=10),
            JobSpec("build-one", "team-a", gpu=1, priority=100, created=11),
        ],
    )
    pods = decide(snapshot, ["allocate"])
    assert pods["default/build-two-0"].status == "Pending"
    assert "non-preemptible allocated 2, requested 2" in pods["default/build-two-0"].reason
    assert pods["default/build-one-0"].status == "Binding"


def test_a_protected_minimum_beyond_the_deserved_quota_may_not_reclaim() -> None:
    # team-b's fair share (2 GPUs of the 8) would hold the minimum, its deserved quota (1) not.
    snapshot = build(
        [node("n", gpu=8)],
        [queue("team-a", gpu_quota=4, created=1), queue("team-b", gpu_quota=1)],
        [JobSpec("hog", "team-a", gpu=8, running_on=["n"]), serving(2, 2, [], queue_name="team-b")],
    )
    pods = decide(snapshot, ["reclaim"])
    assert pods["default/serve-0"].status == "Pending"
    assert "a semi-preemptible job's protected minimum (its first 2 pods) would take it above its deserved quota" in (
        pods["default/serve-0"].reason
    )


def test_the_session_books_the_minimum_as_it_changes_and_a_rollback_restores_it() -> None:
    snapshot = build([node("n", gpu=8)], [queue("team-a", gpu_quota=8)], [serving(5, 3, ["n"] * 2)])
    state = open_session(snapshot, config(), NOW)
    queues, leaf = state.queues, state.queues.tree.index["team-a"]
    stmt = Statement(state.table, queues, state.jobs_by_task)
    job = state.jobs["default/serve"]
    pending = sorted((t for t in job.tasks if t.status is Status.PENDING), key=lambda t: t.key)

    def place_all() -> None:  # the third pod completes the minimum, the two after it are surplus
        for task in pending:
            stmt.place(task, Choice(0, False, ()), state.accepted_quota(task, 0))

    assert (queues.allocated[leaf][0], queues.allocated_np[leaf][0]) == (2, 2)
    place_all()
    assert (queues.allocated[leaf][0], queues.allocated_np[leaf][0]) == (5, 3)
    stmt.rollback()
    assert (queues.allocated[leaf][0], queues.allocated_np[leaf][0]) == (2, 2)

    place_all()
    stmt.commit()
    checkpoint = stmt.checkpoint()
    stmt.evict(pending[-1], "preempt", None)  # a surplus pod leaves: the minimum is as it was
    assert (queues.allocated[leaf][0], queues.allocated_np[leaf][0]) == (4, 3)
    fresh = queue_state_of(state, snapshot)  # counted again from the pods as they stand now
    assert np.array_equal(fresh.allocated_np[leaf], queues.allocated_np[leaf])
    stmt.rollback(checkpoint)
    assert (queues.allocated[leaf][0], queues.allocated_np[leaf][0]) == (5, 3)
