"""A cycle hands its binds out as it commits them: run by run, whole jobs, each pod once."""

from __future__ import annotations

from coordinator.binding import FIRST_RUN
from coordinator.results import BindIntent
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.deltas import ClusterDeltas
from tests.builders import JobSpec, build, config, node, queue


def _cluster(gangs: int, singles: int) -> ClusterDeltas:
    nodes = [node(f"n{i:03d}", gpu=8) for i in range(40)]
    jobs = [JobSpec(f"gang{g:03d}", "q", pods=4, min_member=4, created=g) for g in range(gangs)]
    jobs += [JobSpec(f"one{i:03d}", "q", created=gangs + i) for i in range(singles)]
    return ClusterDeltas.of_snapshot(build(nodes, [queue("q", gpu_quota=-1)], jobs))


def test_the_first_binds_leave_before_the_cycle_has_concluded_its_last_job() -> None:
    coordinator = in_process_coordinator(config(), shards=2)
    coordinator.apply(_cluster(gangs=30, singles=120))
    runs: list[list[BindIntent]] = []
    concluded_when_first_left: list[int] = []

    def sink(run: list[BindIntent]) -> None:
        if not runs:  # what the model assumed bound when the first run left: only part of the cycle
            concluded_when_first_left.append(sum(1 for p in coordinator.model.pods.values() if p.node))
        runs.append(run)

    coordinator.bind_sink = sink
    result = coordinator.cycle(100.0)
    assert len(result.binds) == 240
    assert len(runs) > 1
    assert FIRST_RUN <= len(runs[0]) < FIRST_RUN + 4  # whole jobs: a gang is never split to fill a run
    assert concluded_when_first_left[0] < len(result.binds)
    streamed = [bind for run in runs for bind in run]
    assert streamed == result.binds and result.streamed == len(result.binds)  # each pod once, in order
    for run in runs:  # every gang in one run: all its pods leave together, or none
        gangs = {b.reservation for b in run if "gang" in b.pod}
        for gang in gangs:
            assert sum(1 for b in run if b.reservation == gang) == 4


def test_without_a_sink_the_binds_are_only_in_the_result() -> None:
    coordinator = in_process_coordinator(config())
    coordinator.apply(_cluster(gangs=2, singles=3))
    result = coordinator.cycle(100.0)
    assert len(result.binds) == 11 and result.streamed == 0


def test_a_cycle_with_nothing_new_hands_out_nothing() -> None:
    coordinator = in_process_coordinator(config())
    coordinator.apply(_cluster(gangs=1, singles=1))
    runs: list[list[BindIntent]] = []
    coordinator.bind_sink = runs.append
    assert len(coordinator.cycle(100.0).binds) == 5
    assert coordinator.cycle(101.0).binds == []
    assert sum(len(run) for run in runs) == 5
