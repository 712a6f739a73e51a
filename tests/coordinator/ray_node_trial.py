"""A Ray node lost in the middle of a cycle, on a Ray cluster of three nodes started on this machine
(``ray.cluster_utils.Cluster``: a head, where this process is the driver, and two workers).

Run as ``python -m tests.coordinator.ray_node_trial [--freeze] [--round-timeout=SECONDS]
REPORT.json``, in a process of its own: the driver joins the cluster as ``kai-ray run`` joins one
(``ensure_ray`` with an address), which a test process that already runs the suite's local Ray
instance could not do. It writes what it saw to REPORT.json; ``test_ray_node_loss`` asserts on it.
With ``--freeze`` the node is frozen instead of killed (see 2.). ``--round-timeout`` is the shard
actors' ``shardRoundTimeout`` (the config's default unless given; 0: none, so that a frozen node
is found only by Ray's health checks, about a minute).

What it does:

1. A ``RemoteCoordinator`` as ``kai-ray run`` makes one: where its actor and its shard actors run.
2. The fault trial of ``fault_trials`` over a coordinator in this process whose two shards are
   actors, next to an in-process coordinator fed the same changes that loses nothing. In the
   trial's fourth round that places and holds, right after the shards answered it, the worker
   node hosting a shard is killed whole: its raylet and every process it started, with no
   goodbye to anyone, as when its processes crash. The next exchange, in the same cycle (a
   round that places again, or the settle), meets the dead actor; the coordinator replaces it
   and the cycle fails. Killed processes on one machine close their connections, so that
   exchange learns it at once; a machine that loses power or its network says nothing, which
   ``--freeze`` stands in for: the node's processes are stopped (SIGSTOP), and the exchange
   waits until the round's timeout has passed (without one, until Ray's health checks declare
   the node dead). The stopped processes are killed when the trial ends.
3. Once the replacement has answered, while Ray still counts the dead node alive, three more
   shard actors are made as probes: SPREAD walks every node Ray counts alive in turn, so one of
   them, or the replacement, would land on the dead node unless new shards avoid it.
4. After the trial a new worker node joins, as KubeRay starts one in place of a lost pod, and a
   shard is added: it goes to the new node, the one that hosts no shard, where SPREAD alone
   would pick any of the three in its turn.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psutil
import ray
from ray._private import ray_constants
from ray._private.node import Node as RayNode
from ray.cluster_utils import Cluster
from ray.exceptions import RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from kai_ray.app.actors import RayTransport, RemoteCoordinator, ensure_ray
from kai_ray.app.runtime import in_process_coordinator
from placement.placer import PlacementPolicy
from shards.protocol import Batch, BatchReply, Round, ShardDown
from tests.builders import config
from tests.coordinator import fault_trials

SEED = 11
KILL_AT_ROUND = 4  # the n-th exchange that places and holds; the first cycles bind, later ones too
PROBES = 3  # with the replacement, more new actors than there are nodes: SPREAD would use every one
OBJECT_STORE_BYTES = 80 * 1024 * 1024  # Ray's floor is 75 MiB; the trial stores next to nothing


class NodeKillingTransport(RayTransport):
    """Two shard actors on the cluster; kills the worker node of one of them after the
    ``KILL_AT_ROUND``-th exchange that places and holds, and records what follows."""

    def __init__(self, cluster: Cluster, workers: list[RayNode], freeze: bool, round_timeout: float | None) -> None:
        super().__init__(2, PlacementPolicy.of(config()), round_timeout=round_timeout)
        self.cluster, self.workers = cluster, workers
        self.freeze = freeze
        self.frozen: list[psutil.Process] = []  # killed by ``release``
        self.ray_nodes_before = self.ray_nodes()
        self.place_rounds = 0
        self.victim: int | None = None  # the shard whose node was killed
        self.killed_node = ""
        self.killed_at = 0.0  # time.monotonic() of the kill
        self.exchanges_after_kill = 0  # until the one that found the victim down, that one included
        self.down_in: list[str] = []  # what that exchange asked the victim
        self.down_after = -1.0  # seconds from the kill until an exchange reported the victim down
        self.down_why = ""
        self.back_after = -1.0  # seconds from the kill until the victim's replacement answered
        self.probe_answers: list[Any] = []
        self.probe_handles: list[Any] = []
        self.probed_while_alive = False

    def exchange(self, batches: Mapping[int, Batch]) -> dict[int, BatchReply | ShardDown]:
        if self.victim is not None and self.down_after < 0:
            self.exchanges_after_kill += 1
        out = super().exchange(batches)
        now = time.monotonic()
        reply = out.get(self.victim) if self.victim is not None else None
        if isinstance(reply, ShardDown) and self.down_after < 0:
            self.down_after, self.down_why = now - self.killed_at, str(reply)
            self.down_in = [type(r).__name__ for r in batches[reply.shard_id].requests]
        elif isinstance(reply, BatchReply) and self.down_after >= 0 and self.back_after < 0:
            self.back_after = now - self.killed_at
            self._probe()
        if any(isinstance(r, Round) for batch in batches.values() for r in batch.requests):
            self.place_rounds += 1
            if self.place_rounds == KILL_AT_ROUND:
                self._kill_a_shards_node()
        return out

    def _probe(self) -> None:
        for probe in range(100, 100 + PROBES):
            self.probe_handles.append(self._new(probe))
            self.probe_answers.append(self._node_answers.pop(probe))
        self.probed_while_alive = _alive_to_ray(self.killed_node)

    def _kill_a_shards_node(self) -> None:
        by_id = {worker.node_id: worker for worker in self.workers}
        self.victim = next((sid for sid, node in sorted(self.ray_nodes_before.items()) if node in by_id), None)
        if self.victim is None:
            return  # every shard is on the head, the driver's node, which cannot be killed here
        worker = by_id[self.ray_nodes_before[self.victim]]
        raylet = psutil.Process(worker.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid)
        started = raylet.children(recursive=True)
        self.killed_node, self.killed_at = worker.node_id, time.monotonic()
        if self.freeze:
            for process in [raylet, *started]:
                process.send_signal(signal.SIGSTOP)
                self.frozen.append(process)
            return
        self.cluster.remove_node(worker, allow_graceful=False)
        # The node's workers outlive their raylet for a second or so here, all on one machine; on a
        # machine that lost power they go with it.
        for process in started:
            try:
                process.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                continue

    def release(self) -> None:
        """Kill what was frozen (a stopped process takes SIGKILL)."""
        for process in self.frozen:
            try:
                process.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                continue

    def probes(self) -> dict[str, Any]:
        """Where the probes went (an error's name for one that never ran), and whether Ray still
        counted the dead node alive when they were made."""
        if not self.probe_answers:
            return {"nodes": [], "made_while_killed_node_alive_to_ray": None}
        ready, _ = ray.wait(self.probe_answers, num_returns=len(self.probe_answers), timeout=60)
        nodes = []
        for answer in self.probe_answers:
            try:
                nodes.append(str(ray.get(answer)) if answer in ready else "no answer")
            except RayError as error:
                nodes.append(type(error).__name__)
        for handle in self.probe_handles:
            ray.kill(handle)
        return {"nodes": nodes, "made_while_killed_node_alive_to_ray": self.probed_while_alive}


def _alive_to_ray(node_id: str) -> bool:
    return any(node["NodeID"] == node_id and node["Alive"] for node in ray.nodes())  # type: ignore[no-untyped-call]


def _add_a_shard_after_a_node_joins(cluster: Cluster, transport: NodeKillingTransport) -> tuple[str, str]:
    """The new node's id, and the node of the shard added after it joined."""
    joined = cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE_BYTES)
    # This process's raylet places the shard: once a task pinned to the new node has run there,
    # that raylet knows the node (one registered with Ray may not be known to every raylet yet).
    here = NodeAffinitySchedulingStrategy(joined.node_id, soft=False)
    ray.get(_node_of.options(scheduling_strategy=here).remote(), timeout=60)
    added = max(transport.shard_ids()) + 1
    transport.add(added)
    return joined.node_id, transport.ray_nodes()[added]


@ray.remote(num_cpus=0)
def _node_of() -> str:
    return str(ray.get_runtime_context().get_node_id())


def node_loss_trial(freeze: bool = False, round_timeout: float | None = config().shard_round_timeout) -> dict[str, Any]:
    started = time.monotonic()
    transport: NodeKillingTransport | None = None
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "object_store_memory": OBJECT_STORE_BYTES, "include_dashboard": False},
    )
    try:
        workers = [cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE_BYTES) for _ in range(2)]
        ensure_ray(address=cluster.address)
        out: dict[str, Any] = {"driver_node": ray.get_runtime_context().get_node_id()}
        out["worker_nodes"] = [worker.node_id for worker in workers]
        out["cluster_start_seconds"] = time.monotonic() - started

        remote = RemoteCoordinator(config(), 2)
        out["coordinator_actor_node"], out["coordinator_actor_shard_nodes"] = remote.ray_nodes()
        remote.close()

        trial_started = time.monotonic()
        transport = NodeKillingTransport(cluster, workers, freeze, round_timeout)
        report = fault_trials.shard_trial(SEED, lambda: transport, dict, reference=in_process_coordinator(config(), 2))
        out["trial_seconds"] = time.monotonic() - trial_started
        out["report"] = dataclasses.asdict(report)
        out["probes"] = transport.probes()
        out["shard_nodes_before"] = transport.ray_nodes_before
        out["shard_nodes_after"] = transport.ray_nodes()
        joining = time.monotonic()
        out["joined_node"], out["added_shard_node"] = _add_a_shard_after_a_node_joins(cluster, transport)
        out["join_seconds"] = time.monotonic() - joining
        out["victim"], out["killed_node"] = transport.victim, transport.killed_node
        out["down_after_seconds"], out["down_why"] = transport.down_after, transport.down_why
        out["exchanges_after_kill"], out["down_in"] = transport.exchanges_after_kill, transport.down_in
        out["back_after_seconds"] = transport.back_after
        out["round_timeout"] = round_timeout
        return out
    finally:
        if transport is not None:
            transport.release()
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]


def _round_timeout(args: list[str]) -> float | None:
    given = [arg.removeprefix("--round-timeout=") for arg in args if arg.startswith("--round-timeout=")]
    return (float(given[-1]) or None) if given else config().shard_round_timeout


if __name__ == "__main__":
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    result = node_loss_trial(freeze="--freeze" in sys.argv[1:], round_timeout=_round_timeout(sys.argv[1:-1]))
    Path(sys.argv[-1]).write_text(json.dumps(result, indent=1, sort_keys=True))
