"""The coordinator actor's process dies between cycles, as if the OOM killer took it. The call that
meets the dead actor starts a new one, with new shard actors, from what the old one was told; from
then on it decides as a coordinator that never died, and none of the binds the lost one handed out
(still in flight, not yet seen by the watch) is placed again."""

from __future__ import annotations

import os
import signal

import psutil
import pytest

from coordinator.coordinator import CoordinatorLost, CycleResult
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.deltas import ClusterDeltas
from tests.builders import JobSpec, build, config, node, queue

NOW = 1_000.0


def _kill_coordinator_actor() -> None:
    """SIGKILL the worker process that hosts the coordinator actor (Ray titles it)."""
    killed = 0
    for process in psutil.Process().children(recursive=True):
        try:
            if "ray::_CoordinatorHost" in " ".join(process.cmdline()):
                os.kill(process.pid, signal.SIGKILL)
                killed += 1
        except psutil.Error:
            continue
    assert killed == 1, killed


def _placed(result: CycleResult) -> list[tuple[str, str]]:
    return sorted((bind.pod, bind.node) for bind in result.binds)


def _statuses(result: CycleResult) -> dict[str, tuple[str, str | None]]:
    return {key: (d.status, d.node) for key, d in result.decisions.pods.items()}


def test_a_lost_coordinator_actor_is_replaced_and_decides_as_one_that_never_died(ray_session: None) -> None:
    from kai_ray.app.actors import RemoteCoordinator

    nodes = [node(f"n{i}", gpu=4) for i in range(4)]
    queues = [queue("a", gpu_quota=8), queue("b", gpu_quota=8)]
    first = build(nodes, queues, [JobSpec(f"early{i}", "ab"[i % 2], pods=2, gpu=1) for i in range(4)])
    later = build([], [], [JobSpec(f"late{i}", "ab"[i % 2], pods=2, gpu=1, created=5.0) for i in range(3)])
    remote = RemoteCoordinator(config(), 2)
    never_died = in_process_coordinator(config(), 2)
    try:
        for coordinator in (remote, never_died):
            coordinator.apply(ClusterDeltas.of_snapshot(first))
        handed_out = remote.cycle(NOW)
        assert _placed(handed_out) == _placed(never_died.cycle(NOW)) != []

        _kill_coordinator_actor()
        # The first call to meet the dead actor is a change: it says so, and the new actor has it.
        arrivals = ClusterDeltas(pods_upserted=later.pods, pod_groups_upserted=later.pod_groups)
        with pytest.raises(CoordinatorLost) as lost:
            remote.apply(arrivals)
        assert lost.value.replaced
        never_died.apply(arrivals)
        after, expected = remote.cycle(NOW + 1), never_died.cycle(NOW + 1)
        assert _placed(after) == _placed(expected) != []
        assert not {bind.pod for bind in after.binds} & {bind.pod for bind in handed_out.binds}
        assert _statuses(after) == _statuses(expected)

        _kill_coordinator_actor()
        # A cycle that meets the dead actor is lost (nothing of it was handed out); the next decides.
        with pytest.raises(CoordinatorLost) as lost:
            remote.cycle(NOW + 2)
        assert lost.value.replaced
        remote.bind_failed([after.binds[0].pod])
        never_died.bind_failed([after.binds[0].pod])
        assert _statuses(remote.cycle(NOW + 3)) == _statuses(never_died.cycle(NOW + 3))
    finally:
        remote.close()
