"""How long a round waits for a shard actor (``shardRoundTimeout``): the allowance per batch, and a
shard actor whose process stops answering (SIGSTOP) reported down once it has passed, killed, and
replaced. A whole Ray node gone silent is ``test_ray_node_loss``'s."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator

import psutil
import pytest

from kai_ray.app.round_timeout import TABLE_ITEMS_PER_EXTRA_TIMEOUT, answer_timeout, table_items
from kai_ray.io.config import config_from_mapping
from kai_ray.model import Pod, ResourceVector
from placement.placer import PlacementPolicy
from shards.messages import ShardDeltas
from shards.protocol import ApplyDeltas, Batch, BatchReply, Describe, HandOver, Load, RowsOf, ShardDown, ShardInfo
from tests.builders import config, node

TIMEOUT = 10.0


def test_a_batch_that_loads_no_table_gets_the_timeout_and_a_starting_actor_one_more() -> None:
    plain = Batch(1, (Describe(), RowsOf()))
    assert answer_timeout(TIMEOUT, plain, starting=False) == TIMEOUT
    assert answer_timeout(TIMEOUT, plain, starting=True) == 2 * TIMEOUT
    assert answer_timeout(None, plain, starting=True) is None  # no limit: wait as long as Ray does


def test_a_batch_that_loads_a_table_gets_one_more_timeout_per_ten_thousand_items() -> None:
    a_node = node("n1")
    a_pod = Pod("default", "p1", uid="uid-p1", requests=ResourceVector.of(cpu=1_000, pods=1), node="n1")
    # A rebuild of a 50,000-node shard: 60 s at the default timeout, where it took 2-4 s measured.
    rebuild = Batch(1, (Load(0, (a_node,) * 50_000, ()),))
    assert table_items(rebuild) == 50_000
    assert answer_timeout(TIMEOUT, rebuild, starting=False) == pytest.approx(6 * TIMEOUT)
    assert answer_timeout(TIMEOUT, rebuild, starting=True) == pytest.approx(7 * TIMEOUT)
    # Changes that add nodes and pods count as well (a first fill of the shard); removals do not.
    changes = ShardDeltas(nodes_upserted=(a_node,) * 3_000, pods_upserted=(a_pod,) * 2_000, pods_removed=("x",) * 9)
    fill = Batch(1, (ApplyDeltas(1, changes), Describe()))
    assert table_items(fill) == TABLE_ITEMS_PER_EXTRA_TIMEOUT // 2
    assert answer_timeout(TIMEOUT, fill, starting=False) == pytest.approx(1.5 * TIMEOUT)
    # A resize's hand-over sends the names, and the rows come back in the answer.
    assert table_items(Batch(1, (HandOver(("n1", "n2")),))) == 2


def test_the_timeout_is_a_duration_setting_and_zero_means_none() -> None:
    assert config_from_mapping({}).shard_round_timeout == TIMEOUT
    assert config_from_mapping({"shardRoundTimeout": "1m30s"}).shard_round_timeout == 90.0
    assert config_from_mapping({"shardRoundTimeout": "0s"}).shard_round_timeout is None


@pytest.fixture()
def ray_ready(ray_session: None) -> Iterator[None]:
    yield


def test_a_shard_actor_that_stops_answering_is_down_once_the_timeout_has_passed_and_is_killed(
    ray_ready: None,
) -> None:
    from kai_ray.app.actors import RayTransport

    # Started without a timeout: an actor slow to start on a busy machine is not what this is about.
    transport = RayTransport(2, PlacementPolicy.of(config()), round_timeout=None)
    transport.wait_ready()
    described = transport.exchange({0: Batch(0, (Describe(),))})[0]
    assert isinstance(described, BatchReply) and isinstance(described.replies[0], ShardInfo)
    frozen = psutil.Process(described.replies[0].pid)
    frozen.send_signal(signal.SIGSTOP)
    try:
        transport.round_timeout = 1.0
        started = time.monotonic()
        out = transport.exchange({sid: Batch(0, (Describe(),)) for sid in (0, 1)})
        waited = time.monotonic() - started
        transport.round_timeout = None
        assert str(out[0]) == "shard 0 is down: no answer in 1 s"
        assert isinstance(out[1], BatchReply)  # the other shard's answer is not held up, nor lost
        assert 1.0 <= waited < 3.0, waited
        # Killed by the transport: Ray ends the stopped process (it takes SIGKILL).
        frozen.wait(timeout=30)
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            frozen.send_signal(signal.SIGKILL)
    transport.replace(0)
    answered = transport.exchange({0: Batch(0, (Describe(),))})[0]
    assert isinstance(answered, BatchReply) and not isinstance(answered, ShardDown)
    assert answered.replies[0].pid not in (frozen.pid, os.getpid())  # type: ignore[attr-defined]
    for sid in transport.shard_ids():
        transport.remove(sid)
