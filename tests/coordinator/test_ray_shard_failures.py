"""Real shard actors killed in the middle of a cycle: their process is killed (SIGKILL) or the
actor is killed by Ray after it handled a batch whose answer is then lost. The coordinator
replaces the actor, rebuilds it from its model and binds nothing twice, as with in-process
shards (``test_shard_failures``)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator, Mapping

import pytest

from placement.placer import PlacementPolicy
from shards.protocol import Batch, BatchReply, Describe, ShardDown
from tests.builders import config
from tests.coordinator import fault_trials
from tests.coordinator.fault_trials import Kill


@pytest.fixture()
def ray_ready(ray_session: None) -> Iterator[None]:
    yield


def _killing_transport(shards: int, kill: Kill, by_signal: bool) -> object:
    import ray

    from kai_ray.app.actors import RayTransport

    class KillingRayTransport(RayTransport):
        def __init__(self) -> None:
            super().__init__(shards, PlacementPolicy.of(config()))
            self.rounds = 0
            self.fired = False

        def exchange(self, batches: Mapping[int, Batch]) -> dict[int, BatchReply | ShardDown]:
            self.rounds += 1
            due = not self.fired and self.rounds >= kill.round and kill.shard in batches
            if due and not kill.after_delivery:
                self.fired = True
                self._kill(kill.shard, batches[kill.shard].epoch)
            out = super().exchange(batches)
            if due and kill.after_delivery:
                self.fired = True
                self._kill(kill.shard, batches[kill.shard].epoch)
                out[kill.shard] = ShardDown(kill.shard, "answer lost")
            return out

        def _kill(self, sid: int, epoch: int) -> None:
            handle = self.handles[sid]
            if by_signal:  # the worker process dies, as if the OOM killer took it
                reply = ray.get(handle.handle.remote(Batch(epoch, (Describe(),))))
                os.kill(reply.replies[0].pid, signal.SIGKILL)
            else:
                ray.kill(handle, no_restart=True)

    return KillingRayTransport()


@pytest.mark.parametrize(
    ("kill", "by_signal"),
    [
        (Kill(round=2, shard=0, after_delivery=False), True),  # first cycle's propose
        (Kill(round=8, shard=1, after_delivery=True), False),  # a later cycle, after the shard answered
        (Kill(round=4, shard=1, after_delivery=False), True),  # a prepare or commit round
    ],
)
def test_a_shard_actor_killed_mid_cycle_is_replaced_and_nothing_is_bound_twice(
    ray_ready: None, kill: Kill, by_signal: bool
) -> None:
    transport = _killing_transport(2, kill, by_signal)
    report = fault_trials.shard_trial(11, lambda: transport, dict)  # type: ignore[arg-type,return-value]
    assert transport.fired  # type: ignore[attr-defined]
    assert len(report.failed_cycles) == 1, report
    assert not report.bound_twice and not report.partial_gangs and not report.overcommitted
    assert not report.lost_deltas, report.lost_deltas
    assert report.resumed_after and report.resumed_after[0] <= 2
    assert report.binds > 0
