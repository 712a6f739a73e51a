"""Named scenarios for ``kai-ray simulate --scenario``: a fixed cluster, queues and jobs that show
one behaviour, instead of the synthetic cluster and random workload.

``kai-time-based-fairshare`` is the example of KAI's docs/time-based-fairshare (and of its
simulator's two-queue oscillation config): one 16-GPU node, two queues under one department,
each with no quota and over-quota weight 1, each submitting a backlog of 16-GPU single-pod
jobs that run until evicted. KAI's simulator counts in cycles (window 256, half-life 128, 1024
cycles); here a cycle is ``PERIOD`` simulated seconds, so the same run is a 2560 s window with a
1280 s half-life over 10240 s. Without usage one queue keeps the node for good (strict DRF);
with it the node alternates and each queue's share of the GPU-hours goes to one half.

``big-gang`` is a 512-pod gang in a busy 1,000-node cluster, for reservations and backfill
(docs/reservation-backfill.md): run it with and without ``reservation`` in the config. That
cluster still leaves whole GPUs free, so the gang starts at once either way; ``starved-gang``
(``starved_gang.py``) is the workload in which it never starts without a reservation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from kai_ray.app.sim import starved_gang as starved
from kai_ray.app.sim.cluster import model_nodes
from kai_ray.app.sim.workload import UNLIMITED, JobSpec, Workload, generate
from kai_ray.config import SchedulerConfig
from kai_ray.model import Node, Queue, QueueResource, ResourceVector

GIB = 2**30
PERIOD = 10.0
CYCLES = 1024
KAI_EXAMPLE = {
    "kValue": 1.0,
    "victimSearchBackoff": "0s",  # KAI searches for victims every cycle
    "usageDBConfig": {
        "clientType": "accounting",
        "usageParams": {
            "windowSize": f"{256 * PERIOD:g}s",
            "halfLifePeriod": f"{128 * PERIOD:g}s",
            "fetchInterval": f"{PERIOD:g}s",
            "extraParams": {"resolution": f"{PERIOD:g}s"},
        },
    },
}


@dataclass(frozen=True, slots=True)
class Scenario:
    nodes: tuple[Node, ...]
    workload: Workload
    config: SchedulerConfig  # used unless the user passes --config
    hours: float
    period: float


def kai_time_based_fairshare(seed: int = 1, jobs_per_queue: int = 100) -> Scenario:
    node = Node("gpu-node-0", ResourceVector.of(cpu=128_000, memory=1024 * GIB, gpu=16, pods=110))
    gpu = QueueResource(quota=0, over_quota_weight=1, limit=-1)
    queues = (
        Queue("training-department", None, 100, gpu, UNLIMITED, UNLIMITED, created=0),
        Queue("team-a", "training-department", 100, gpu, UNLIMITED, UNLIMITED, created=1),
        Queue("team-b", "training-department", 100, gpu, UNLIMITED, UNLIMITED, created=2),
    )
    jobs = [
        JobSpec(
            name=f"{queue}-job-{i:03d}",
            kind="gpu",
            queue=queue,
            pods=1,
            min_member=1,
            gpus=16,
            fraction=None,
            cpu_millis=1000,
            memory_bytes=4 * GIB,
            priority_class="train",
            arrival=0.0,
            duration=1e9,  # runs until evicted, as in KAI's simulator
        )
        for i in range(jobs_per_queue)
        for queue in ("team-a", "team-b")
    ]
    config = SchedulerConfig.model_validate(KAI_EXAMPLE)
    return Scenario((node,), Workload(queues, tuple(jobs)), config, CYCLES * PERIOD / 3600, PERIOD)


BIG_GANG_NODES = 1000
BIG_GANG_PODS = 512
BIG_GANG_ARRIVAL = 7200.0  # seconds: the cluster is full and its queues long by then
BIG_GANG_HOURS = 6.0
RUNTIME_MARGIN = 1.25  # users state an expected runtime a quarter above what the job takes


def big_gang(seed: int = 1) -> Scenario:
    """A busy 1,000-node cluster (the synthetic pools, offered 1.3 times what its GPUs can run, for
    the whole run) and one 512-pod gang of one-GPU pods arriving after two hours: how long it
    waits, with ``reservation`` in the config or without. Every job states an expected runtime."""
    nodes = model_nodes(BIG_GANG_NODES, taint=True)
    gpus = sum(n.allocatable.gpu for n in nodes)
    stream = generate(gpus, seed, arrival_window=BIG_GANG_HOURS * 3600, load=1.3)
    stated = [replace(j, expected_runtime=float(math.ceil(j.duration * RUNTIME_MARGIN / 60) * 60)) for j in stream.jobs]
    queue = stream.leaf_queues[0]
    gang = JobSpec(
        name="big-gang",
        kind="training",
        queue=queue,
        pods=BIG_GANG_PODS,
        min_member=BIG_GANG_PODS,
        gpus=1,
        fraction=None,
        cpu_millis=8000,
        memory_bytes=64 * GIB,
        priority_class="train",
        arrival=BIG_GANG_ARRIVAL,
        duration=3600.0,
        expected_runtime=3600.0 * RUNTIME_MARGIN,
    )
    jobs = sorted([*stated, gang], key=lambda j: j.arrival)
    return Scenario(tuple(nodes), Workload(stream.queues, tuple(jobs)), SchedulerConfig(), BIG_GANG_HOURS, 10.0)


def starved_gang(seed: int = 1, size: starved.StarvedGang | None = None) -> Scenario:
    """A full 1,000-node cluster whose small jobs take every GPU that frees, and a 512-pod gang
    that starves there without ``reservation`` in the config (``starved_gang.py``)."""
    size = size or starved.StarvedGang()
    nodes = model_nodes(size.nodes, taint=True)
    gpus = float(sum(n.allocatable.gpu for n in nodes))
    return Scenario(tuple(nodes), starved.workload(size, gpus, seed), SchedulerConfig(), size.hours, PERIOD)


ScenarioMaker = Callable[[int], Scenario]  # seed -> the scenario
SCENARIOS: dict[str, ScenarioMaker] = {
    "kai-time-based-fairshare": kai_time_based_fairshare,
    "big-gang": big_gang,
    "starved-gang": starved_gang,
}
