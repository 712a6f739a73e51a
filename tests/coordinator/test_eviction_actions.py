"""Reclaim, preempt, consolidation and stale-gang eviction: who is evicted and who is spared."""

from __future__ import annotations

from dataclasses import replace

from coordinator.scheduler import run_session
from tests.builders import JobSpec, build, config, node, queue

NOW = 1_000_000.0


def decide(snapshot, actions, **cfg):  # type: ignore[no-untyped-def]
    return run_session(snapshot, config(**cfg), NOW, actions).pods


def test_reclaim_takes_back_from_a_queue_over_its_share() -> None:
    snapshot = build(
        [node("a", gpu=4)],
        [queue("q1", gpu_quota=2, created=0), queue("q2", gpu_quota=2, created=1)],
        [JobSpec(f"hog{i}", "q1", gpu=1, running_on=["a"], created=i) for i in range(4)]
        + [JobSpec("wants", "q2", gpu=2, created=10)],
    )
    pods = decide(snapshot, ["reclaim"])
    assert pods["default/wants-0"].status == "Pipelined"
    evicted = [k for k, p in pods.items() if p.status == "Releasing"]
    assert len(evicted) == 2 and all(k.startswith("default/hog") for k in evicted)


def test_reclaim_never_touches_a_queue_within_its_quota() -> None:
    snapshot = build(
        [node("a", gpu=4)],
        [queue("q1", gpu_quota=4, created=0), queue("q2", gpu_quota=0, created=1)],
        [JobSpec(f"mine{i}", "q1", gpu=1, running_on=["a"], created=i) for i in range(4)]
        + [JobSpec("wants", "q2", gpu=1, created=10)],
    )
    pods = decide(snapshot, ["reclaim"])
    assert pods["default/wants-0"].status == "Pending"
    assert not [k for k, p in pods.items() if p.status == "Releasing"]


def test_non_preemptible_jobs_are_never_victims() -> None:
    snapshot = build(
        [node("a", gpu=2)],
        [queue("q1", gpu_quota=0, created=0), queue("q2", gpu_quota=2, created=1)],
        [JobSpec("build", "q1", gpu=2, priority=100, running_on=["a"]), JobSpec("wants", "q2", gpu=2, created=10)],
    )
    pods = decide(snapshot, ["reclaim", "preempt"])
    assert pods["default/build-0"].status == "Running"


def test_preempt_evicts_the_lowest_priority_job_in_the_same_queue() -> None:
    snapshot = build(
        [node("a", gpu=2)],
        [queue("q", gpu_quota=2)],
        [
            JobSpec("train", "q", gpu=1, priority=50, running_on=["a"]),
            JobSpec("interactive", "q", gpu=1, priority=75, running_on=["a"]),
            JobSpec("serve", "q", gpu=1, priority=125, created=10),
        ],
    )
    pods = decide(snapshot, ["preempt"])
    assert pods["default/train-0"].status == "Releasing"
    assert pods["default/interactive-0"].status == "Running"
    assert pods["default/serve-0"].status == "Pipelined"


def test_consolidation_moves_a_pod_instead_of_killing_it() -> None:
    snapshot = build(
        [node("a", gpu=4), node("b", gpu=4)],
        [queue("q", gpu_quota=8)],
        [
            JobSpec("small-a", "q", gpu=2, running_on=["a"]),
            JobSpec("small-b", "q", gpu=2, running_on=["b"]),
            JobSpec("big", "q", gpu=3, created=10),
        ],
    )
    pods = decide(snapshot, ["consolidation"])
    assert pods["default/big-0"].status == "Pipelined"
    moved = [p for k, p in pods.items() if k.startswith("default/small") and p.status == "Pipelined"]
    assert len(moved) == 1
    assert not [k for k, p in pods.items() if p.status == "Releasing"]


def test_a_gang_below_its_minimum_is_evicted_after_the_grace_period() -> None:
    from dataclasses import replace

    snapshot = build(
        [node("a", gpu=4)], [queue("q", gpu_quota=4)], [JobSpec("broken", "q", pods=3, gpu=1, running_on=["a", "a"])]
    )
    group = replace(snapshot.pod_groups[0], stale_since=NOW - 120)
    snapshot = replace(snapshot, pod_groups=(group,))
    pods = decide(snapshot, ["stalegangeviction"])
    assert pods["default/broken-0"].status == "Releasing" and pods["default/broken-1"].status == "Releasing"
    fresh = replace(snapshot, pod_groups=(replace(group, stale_since=NOW - 10),))
    assert decide(fresh, ["stalegangeviction"])["default/broken-0"].status == "Running"


def _victim_fits_back_home(action: str) -> None:
    """A victim whose best place in the simulation is the node it runs on is not a victim: KAI takes
    the eviction back (a move to the same node is no move) and the pod keeps running there."""
    snapshot = build(
        [node("a", gpu=4, cpu=32_000)],
        [queue("dept", gpu_quota=4), queue("q", parent="dept", gpu_quota=4)],
        [
            JobSpec("cpu-job", "q", gpu=0, cpu=8_000, priority=75, running_on=["a"]),
            JobSpec("wants", "q", gpu=1, priority=100 if action == "preempt" else 50, created=10),
        ],
    )
    pods = decide(snapshot, [action])
    assert (pods["default/cpu-job-0"].status, pods["default/cpu-job-0"].node) == ("Running", "a")
    assert (pods["default/wants-0"].status, pods["default/wants-0"].node) == ("Pipelined", "a")


def test_preempt_leaves_a_victim_running_when_it_would_go_back_to_its_own_node() -> None:
    _victim_fits_back_home("preempt")


def test_consolidation_leaves_a_victim_running_when_it_would_go_back_to_its_own_node() -> None:
    _victim_fits_back_home("consolidation")


def _started(snapshot, job: str, seconds_ago: float):  # type: ignore[no-untyped-def]
    groups = tuple(replace(g, last_start=NOW - seconds_ago) if g.name == job else g for g in snapshot.pod_groups)
    return replace(snapshot, pod_groups=groups)


def _min_runtimes(snapshot, **by_queue: tuple[float | None, float | None]):  # type: ignore[no-untyped-def]
    queues = tuple(
        replace(q, preempt_min_runtime=by_queue[q.name][0], reclaim_min_runtime=by_queue[q.name][1])
        if q.name in by_queue
        else q
        for q in snapshot.queues
    )
    return replace(snapshot, queues=queues)


def test_a_queues_preempt_min_runtime_protects_its_young_jobs() -> None:
    snapshot = build(
        [node("a", gpu=2)],
        [queue("dept", gpu_quota=2), queue("q", parent="dept", gpu_quota=2)],
        [
            JobSpec("young", "q", gpu=2, priority=50, running_on=["a"]),
            JobSpec("serve", "q", gpu=2, priority=75, created=10),
        ],
    )
    snapshot = _started(snapshot, "young", 120)
    assert decide(_min_runtimes(snapshot, q=(600.0, None)), ["preempt"])["default/young-0"].status == "Running"
    # an ancestor's value applies when the queue sets none, and the default when nobody does
    assert decide(_min_runtimes(snapshot, dept=(600.0, None)), ["preempt"])["default/young-0"].status == "Running"
    assert decide(_min_runtimes(snapshot, q=(60.0, None)), ["preempt"])["default/young-0"].status == "Releasing"


def test_the_victims_side_reclaim_min_runtime_protects_its_young_jobs() -> None:
    snapshot = build(
        [node("a", gpu=4)],
        [
            queue("dept", gpu_quota=4),
            queue("q1", parent="dept", gpu_quota=0, created=0),
            queue("q2", parent="dept", gpu_quota=4, created=1),
        ],
        [
            JobSpec("young", "q1", gpu=4, running_on=["a"]),
            JobSpec("wants", "q2", gpu=2, created=10),
        ],
    )
    snapshot = _started(snapshot, "young", 120)
    assert decide(_min_runtimes(snapshot, q1=(None, 600.0)), ["reclaim"])["default/young-0"].status == "Running"
    assert decide(_min_runtimes(snapshot, q1=(None, 60.0)), ["reclaim"])["default/young-0"].status == "Releasing"


def test_a_young_elastic_victim_only_gives_pods_above_its_minimum() -> None:
    snapshot = build(
        [node("a", gpu=3)],
        [queue("dept", gpu_quota=3), queue("q", parent="dept", gpu_quota=3)],
        [
            JobSpec("elastic", "q", pods=3, min_member=1, gpu=1, priority=50, running_on=["a", "a", "a"]),
            JobSpec("serve", "q", gpu=2, priority=75, created=10),
            JobSpec("big", "q", gpu=3, priority=75, created=20),
        ],
    )
    pods = decide(_started(snapshot, "elastic", 120), ["preempt"], defaultPreemptMinRuntime=600)
    assert [pods[f"default/elastic-{i}"].status for i in range(3)].count("Running") == 1
    assert pods["default/serve-0"].status == "Pipelined"
    assert pods["default/big-0"].status == "Pending"
