"""Minimum runtimes per queue, as KAI's minruntime plugin and its design doc define them.

Every scenario runs twice where it matters: once without the protection (the eviction happens,
so the test could fail) and once with it (the victim is spared).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from coordinator.min_runtime import MinRuntimes
from coordinator.scheduler import run_session
from kai_ray.model import ClusterSnapshot, Queue
from tests.builders import JobSpec, build, config, node, queue

NOW = 1_000_000.0


def q(name: str, parent: str | None = None, preempt: float | None = None, reclaim: float | None = None) -> Queue:
    return replace(queue(name, parent), preempt_min_runtime=preempt, reclaim_min_runtime=reclaim)


def started(snapshot: ClusterSnapshot, job: str, seconds_ago: float) -> ClusterSnapshot:
    groups = tuple(replace(g, last_start=NOW - seconds_ago) if g.name == job else g for g in snapshot.pod_groups)
    return replace(snapshot, pod_groups=groups)


def evicted(snapshot: ClusterSnapshot, actions: list[str], **cfg: object) -> set[str]:
    pods = run_session(snapshot, config(**cfg), NOW, actions).pods
    return {key.split("/")[1].rsplit("-", 1)[0] for key, p in pods.items() if p.status == "Releasing"}


# ----------------------------------------------------------------------------- resolution
# KAI's resolver test tree: three top-level queues with two-level children.
KAI_TREE = [
    q("dev", preempt=5, reclaim=10),
    q("prod", preempt=20, reclaim=30),
    q("research", preempt=4, reclaim=6),
    q("dev-team1", "dev", reclaim=8),
    q("dev-team2", "dev", preempt=3),
    q("prod-team1", "prod", reclaim=25),
    q("prod-team2", "prod", preempt=15, reclaim=35),
    q("research-project", "research", preempt=7, reclaim=9),
]


@pytest.mark.parametrize(
    ("victim", "expected"),
    [("prod-team2", 15), ("prod-team1", 20), ("dev-team1", 5), ("prod", 20), ("research", 4), ("nowhere", 2)],
)
def test_preempt_minimum_is_the_nearest_queue_that_sets_one(victim: str, expected: float) -> None:
    rules = MinRuntimes.of(KAI_TREE, default_preempt=2, default_reclaim=1, method="lca")
    assert rules.preempt(victim) == expected


@pytest.mark.parametrize(
    ("reclaimer", "victim", "lca", "queue_method"),
    [
        ("dev-team1", "prod-team2", 30, 35),  # different trees: the victim's top-level queue
        ("dev-team2", "dev-team1", 8, 8),  # siblings: the victim's own queue
        ("prod-team1", "prod-team2", 35, 35),
        ("prod-team2", "prod-team2", 35, 35),
        ("dev-team1", "research-project", 6, 9),
        ("dev-team1", "dev-team2", 10, 10),  # dev-team2 sets none: its parent's value
    ],
)
def test_reclaim_minimum_below_the_lowest_common_ancestor(
    reclaimer: str, victim: str, lca: float, queue_method: float
) -> None:
    assert MinRuntimes.of(KAI_TREE, 2, 1, "lca").reclaim(reclaimer, victim) == lca
    assert MinRuntimes.of(KAI_TREE, 2, 1, "queue").reclaim(reclaimer, victim) == queue_method


# The design doc's reclaim tree: A -> B (600s) -> C -> leaf1 (0s), leaf2 (180s); B -> D (60s) -> leaf3.
DESIGN_TREE = [
    q("A"),
    q("B", "A", reclaim=600),
    q("C", "B"),
    q("D", "B", reclaim=60),
    q("leaf1", "C", reclaim=0),
    q("leaf2", "C", reclaim=180),
    q("leaf3", "D"),
]


@pytest.mark.parametrize(
    ("reclaimer", "victim", "expected"),
    [("leaf1", "leaf3", 60), ("leaf1", "leaf2", 180), ("leaf3", "leaf1", 600)],
)
def test_design_doc_reclaim_examples(reclaimer: str, victim: str, expected: float) -> None:
    assert MinRuntimes.of(DESIGN_TREE, 0, 0, "lca").reclaim(reclaimer, victim) == expected


# ----------------------------------------------------------------------------- reclaim, in sessions
def reclaim_case(victim_queue: str, reclaimer_queue: str) -> ClusterSnapshot:
    """The victim's queue holds the whole node; the reclaimer's sibling subtree wants half."""
    return build(
        [node("a", gpu=4)],
        DESIGN_TREE,
        [
            JobSpec("hog1", victim_queue, gpu=2, running_on=["a"], created=1),
            JobSpec("hog2", victim_queue, gpu=2, running_on=["a"], created=2),
            JobSpec("wants", reclaimer_queue, gpu=2, created=10),
        ],
    )


@pytest.mark.parametrize(
    ("reclaimer", "victim", "protected_for"),
    [("leaf1", "leaf3", 60), ("leaf1", "leaf2", 180), ("leaf3", "leaf1", 600)],
)
def test_reclaim_spares_a_victim_until_the_resolved_minimum_has_passed(
    reclaimer: str, victim: str, protected_for: float
) -> None:
    case = reclaim_case(victim, reclaimer)
    young = started(started(case, "hog1", protected_for - 10), "hog2", protected_for - 10)
    old = started(started(case, "hog1", protected_for + 10), "hog2", protected_for + 10)
    assert evicted(young, ["reclaim"]) == set()
    assert evicted(old, ["reclaim"]) == {"hog2"}


def test_a_leaf_setting_zero_does_not_shield_it_from_cousins_under_lca() -> None:
    """leaf1 says 0s, but a reclaimer from D's subtree meets B's 600s; ``queue`` reads leaf1's own."""
    case = started(started(reclaim_case("leaf1", "leaf3"), "hog1", 300), "hog2", 300)
    assert evicted(case, ["reclaim"]) == set()
    assert evicted(case, ["reclaim"], reclaimResolveMethod="queue") == {"hog2"}


def two_hogs(tree: list[Queue], victim_queue: str, reclaimer_queue: str, ran_for: float | None) -> ClusterSnapshot:
    """Two 1-GPU jobs of one queue fill a 2-GPU node (running ``ran_for`` seconds, or never
    started); another queue wants one GPU."""
    case = build(
        [node("n", gpu=2)],
        tree,
        [
            JobSpec("hog1", victim_queue, gpu=1, running_on=["n"], created=1),
            JobSpec("hog2", victim_queue, gpu=1, running_on=["n"], created=2),
            JobSpec("wants", reclaimer_queue, gpu=1, created=10),
        ],
    )
    return case if ran_for is None else started(started(case, "hog1", ran_for), "hog2", ran_for)


def test_kai_doc_workflow_thirty_seconds_of_reclaim_protection() -> None:
    """minruntime.md: a job of a queue with reclaimMinRuntime 30s is protected at 20s of runtime."""
    tree = [q("production", reclaim=30), q("research")]
    assert evicted(two_hogs(tree, "production", "research", 20), ["reclaim"]) == set()
    assert evicted(two_hogs(tree, "production", "research", 40), ["reclaim"]) == {"hog2"}


def test_default_reclaim_minimum_applies_where_no_queue_sets_one() -> None:
    case = two_hogs([q("a"), q("b")], "a", "b", 50)
    assert evicted(case, ["reclaim"], defaultReclaimMinRuntime="60s") == set()
    assert evicted(case, ["reclaim"], defaultReclaimMinRuntime="40s") == {"hog2"}


def test_a_job_that_never_started_is_not_protected() -> None:
    case = two_hogs([q("a", reclaim=3600), q("b")], "a", "b", None)
    assert evicted(case, ["reclaim"]) == {"hog2"}  # no last-start time: KAI does not protect it


# ----------------------------------------------------------------------------- preempt, in sessions
def preempt_case(leaf: str) -> ClusterSnapshot:
    tree = [q("A"), q("B", "A", preempt=600), q("C", "B"), q("leaf1", "C", preempt=300), q("leaf2", "C")]
    return build(
        [node("a", gpu=2)],
        tree,
        [
            JobSpec("low", leaf, gpu=2, priority=50, running_on=["a"], created=1),
            JobSpec("high", leaf, gpu=2, priority=75, created=10),
        ],
    )


@pytest.mark.parametrize(("leaf", "minimum"), [("leaf1", 300), ("leaf2", 600)])
def test_preempt_minimum_set_on_the_leaf_or_inherited_from_an_ancestor(leaf: str, minimum: float) -> None:
    """The design doc: leaf1 sets 300s; leaf2 sets none and inherits B's 600s."""
    case = preempt_case(leaf)
    assert evicted(started(case, "low", minimum - 1), ["preempt"]) == set()
    assert evicted(started(case, "low", minimum + 1), ["preempt"]) == {"low"}


# ----------------------------------------------------------------------------- elastic victims
def elastic_case(seconds_ago: float) -> ClusterSnapshot:
    tree = [q("a", reclaim=600), q("b")]
    case = build(
        [node("n", gpu=4)],
        tree,
        [
            JobSpec("elastic", "a", pods=4, min_member=2, gpu=1, running_on=["n"] * 4, created=1),
            JobSpec("wants", "b", pods=1, gpu=2, created=10),
        ],
    )
    return started(case, "elastic", seconds_ago)


def test_a_protected_elastic_job_gives_up_only_pods_above_its_minimum() -> None:
    pods = run_session(elastic_case(60), config(), NOW, ["reclaim"]).pods
    releasing = [k for k, p in pods.items() if p.status == "Releasing"]
    assert len(releasing) == 2 and pods["default/wants-0"].status == "Pipelined"


def test_a_protected_elastic_job_is_never_taken_below_its_minimum() -> None:
    case = replace(
        elastic_case(60),
        pod_groups=tuple(replace(g, min_member=3) if g.name == "elastic" else g for g in elastic_case(60).pod_groups),
    )
    assert evicted(case, ["reclaim"]) == set()  # freeing 2 GPUs would leave 2 of its minimum 3
    unprotected = started(case, "elastic", 700)
    assert evicted(unprotected, ["reclaim"]) == {"elastic"}
