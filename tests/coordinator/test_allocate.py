"""The allocate action as a user sees it: who gets bound, where, and why others wait."""

from __future__ import annotations

from coordinator.scheduler import run_session
from tests.builders import JobSpec, build, config, node, queue

NOW = 1_000_000.0


def decide(snapshot, actions=("allocate",), **cfg):  # type: ignore[no-untyped-def]
    return run_session(snapshot, config(**cfg), NOW, actions).pods


def test_a_gang_that_does_not_fit_binds_nothing_and_says_why() -> None:
    snapshot = build([node("n1", gpu=4)], [queue("q", gpu_quota=8)], [JobSpec("train", "q", pods=3, gpu=2)])
    pods = decide(snapshot)
    assert {p.status for p in pods.values()} == {"Pending"}
    reason = pods["default/train-0"].reason
    assert reason.startswith("Resources were found for 2 pods while 3 are required for gang scheduling. ")
    assert "no nodes with enough resources were found: 1 node(s) didn't have enough resources: GPUs." in reason


def test_binpack_fills_the_busier_node_first() -> None:
    snapshot = build(
        [node("a", gpu=8), node("b", gpu=8)],
        [queue("q", gpu_quota=16)],
        [JobSpec("old", "q", gpu=4, running_on=["b"]), JobSpec("new", "q", gpu=2)],
    )
    assert decide(snapshot)["default/new-0"].node == "b"


def test_spread_prefers_the_emptier_node() -> None:
    snapshot = build(
        [node("a", gpu=8), node("b", gpu=8)],
        [queue("q", gpu_quota=16)],
        [JobSpec("old", "q", gpu=4, running_on=["b"]), JobSpec("new", "q", gpu=2)],
    )
    pods = decide(snapshot, placementStrategy={"gpu": "spread", "cpu": "spread"})
    assert pods["default/new-0"].node == "a"


def test_a_job_that_needs_releasing_capacity_is_pipelined_as_a_whole() -> None:
    snapshot = build(
        [node("a", gpu=4)],
        [queue("q", gpu_quota=8)],
        [JobSpec("leaving", "q", gpu=2, releasing_on=["a"]), JobSpec("gang", "q", pods=2, gpu=2)],
    )
    pods = decide(snapshot)
    assert {pods["default/gang-0"].status, pods["default/gang-1"].status} == {"Pipelined"}


def test_queue_limit_is_never_exceeded_and_named_in_the_reason() -> None:
    snapshot = build([node("a", gpu=8)], [queue("q", gpu_quota=2, gpu_limit=3)], [JobSpec("big", "q", gpu=4)])
    pods = decide(snapshot)
    assert pods["default/big-0"].status == "Pending"
    assert "OverLimit" in pods["default/big-0"].reason and "limit 3" in pods["default/big-0"].reason


def test_fractions_share_one_gpu_before_opening_another() -> None:
    snapshot = build(
        [node("a", gpu=2)],
        [queue("q", gpu_quota=2)],
        [JobSpec("f1", "q", fraction=0.5), JobSpec("f2", "q", fraction=0.5, created=1)],
    )
    pods = decide(snapshot)
    assert pods["default/f1-0"].gpu_groups == pods["default/f2-0"].gpu_groups
    assert len(pods["default/f1-0"].gpu_groups) == 1


def test_elastic_jobs_of_two_queues_interleave() -> None:
    snapshot = build(
        [node("a", gpu=4)],
        [queue("q1", gpu_quota=2, created=0), queue("q2", gpu_quota=2, created=1)],
        [JobSpec("e1", "q1", pods=4, min_member=1), JobSpec("e2", "q2", pods=4, min_member=1)],
    )
    pods = decide(snapshot)
    bound = [k for k, p in pods.items() if p.status == "Binding"]
    assert sum(k.startswith("default/e1") for k in bound) == 2
    assert sum(k.startswith("default/e2") for k in bound) == 2


def test_a_pod_naming_a_missing_queue_waits_with_kais_reason() -> None:
    snapshot = build([node("a")], [queue("q")], [JobSpec("lost", "nowhere")])
    assert decide(snapshot)["default/lost-0"].reason.startswith("QueueDoesNotExist")


def test_same_input_gives_the_same_decisions() -> None:
    jobs = [JobSpec(f"j{i}", "q", pods=2, gpu=1 + i % 3, created=i) for i in range(12)]
    snapshot = build([node(f"n{i}", gpu=8) for i in range(4)], [queue("q", gpu_quota=32)], jobs)
    assert decide(snapshot) == decide(snapshot)
