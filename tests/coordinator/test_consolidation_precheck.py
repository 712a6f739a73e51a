"""Consolidation searches only where moving pods could free GPUs on nodes big enough for the job."""

from __future__ import annotations

from coordinator.scheduler import run_session
from tests.builders import JobSpec, build, config, node, queue

NOW = 1_000_000.0


def test_no_search_when_the_big_nodes_run_only_pods_too_big_for_the_small_ones(
    searches: list[tuple[str, str]],
) -> None:
    # Both 8-GPU nodes run an 8-GPU pod; the 18 idle GPUs (more than the gang's 16) are on 4-GPU
    # nodes, where neither those pods nor the gang's fit. Each pod on a 4-GPU node "frees a slot"
    # by the slot count, so only the bound on the big nodes' GPUs rules the search out.
    small = [f"small-{i}" for i in range(6)]
    nodes = [node("big-1", gpu=8), node("big-2", gpu=8)] + [node(name, gpu=4) for name in small]
    jobs = [
        JobSpec("held-1", "q", gpu=8, running_on=["big-1"]),
        JobSpec("held-2", "q", gpu=8, running_on=["big-2"]),
        JobSpec("little", "q", pods=6, min_member=1, gpu=1, running_on=small),
        JobSpec("gang", "q", pods=2, gpu=8, created=10),
    ]
    pods = run_session(build(nodes, [queue("q", gpu_quota=32)], jobs), config(), NOW, ["consolidation"]).pods
    assert searches == []
    assert pods["default/gang-0"].status == "Pending"


def test_a_move_onto_smaller_nodes_is_still_searched_for_and_found() -> None:
    # Two 4-GPU pods fill the 8-GPU node; moving both onto the idle 4-GPU nodes frees it.
    nodes = [node("big", gpu=8), node("small-1", gpu=4), node("small-2", gpu=4)]
    jobs = [
        JobSpec("half-1", "q", gpu=4, running_on=["big"]),
        JobSpec("half-2", "q", gpu=4, running_on=["big"]),
        JobSpec("whole", "q", gpu=8, created=10),
    ]
    pods = run_session(build(nodes, [queue("q", gpu_quota=16)], jobs), config(), NOW, ["consolidation"]).pods
    assert pods["default/whole-0"].status == "Pipelined"
    assert {pods[f"default/half-{i}-0"].node for i in (1, 2)} == {"small-1", "small-2"}
