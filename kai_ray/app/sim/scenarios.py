"""Named scenarios for ``kai-ray simulate --scenario``: a fixed cluster, queues and jobs that show
one behaviour, instead of the synthetic cluster and random workload.

``kai-time-based-fairshare`` is the example of KAI's docs/time-based-fairshare (and of its
simulator's two-queue oscillation config): one 16-GPU node, two queues under one department,
each with no quota and over-quota weight 1, each submitting a backlog of 16-GPU single-pod
jobs that run until evicted. KAI's simulator counts in cycles (window 256, half-life 128, 1024
cycles); here a cycle is ``PERIOD`` simulated seconds, so the same run is a 2560 s window with a
1280 s half-life over 10240 s. Without usage one queue keeps the node for good (strict DRF);
with it the node alternates and each queue's share of the GPU-hours goes to one half.
"""

from __future__ import annotations

from dataclasses import dataclass

from kai_ray.app.sim.workload import UNLIMITED, JobSpec, Workload
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


def kai_time_based_fairshare(jobs_per_queue: int = 100) -> Scenario:
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


SCENARIOS = {"kai-time-based-fairshare": kai_time_based_fairshare}
