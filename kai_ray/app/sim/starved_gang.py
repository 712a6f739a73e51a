"""The ``starved-gang`` scenario: a large one-GPU gang that never starts without reservations
(docs/reservation-backfill.md).

The cluster is the synthetic pools, full from the start: small jobs (one pod of 1, 2, 4 or 8
GPUs, short, medium and long runtimes) asking for more GPUs than it has are waiting when the run
begins, and a Poisson stream of them offers more GPU-hours than the cluster has for the whole
run, so some of them always wait. Three in four state an expected runtime (a quarter above what
they take, rounded up to a minute); the rest state none.

Two teams share the cluster, each deserving half of its GPUs, and send as many small jobs. The
gang arrives in team-a once the cluster is full. What keeps it out is KAI's semantics, nothing
else:

- it needs every one of its pods placed at once, and GPUs free one job at a time, a few per
  cycle, while the gang needs hundreds;
- allocate does not stop at a job that fails: the small jobs ordered after the gang (in its own
  queue, and in team-b whenever fair share serves team-b first) take what freed in the same cycle;
- team-a holds about its fair share already, so the gang would take it far above its share:
  reclaim takes nothing from team-b for it ("queue team-a cannot reclaim: it would go above its
  fair share"), and every job has the same priority, so preempt does nothing either.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from kai_ray.app.sim.workload import UNLIMITED, JobSpec, Workload
from kai_ray.model import Queue, QueueResource

GIB = 2**30
GANG_QUEUE = "team-a"
RUNTIME_MARGIN = 1.25  # users state an expected runtime a quarter above what the job takes
GPUS_PER_JOB = (1, 1, 1, 1, 2, 2, 4, 8)  # drawn uniformly: mostly single GPUs, some whole nodes
RUNTIMES = ((0.4, 900.0), (0.4, 3600.0), (0.2, 3 * 3600.0))  # (share, median seconds), log-normal
SIGMA = 0.5  # spread of a log-normal runtime around its median


@dataclass(frozen=True, slots=True)
class StarvedGang:
    """The sizes of one run: the full scenario is 1,000 nodes and a 512-pod gang."""

    nodes: int = 1000
    gang_pods: int = 512
    gang_arrival: float = 1800.0  # seconds: the cluster is full by then, and has been for a while
    hours: float = 2.0  # jobs arrive for the whole run, so the cluster never drains
    backlog: float = 1.2  # jobs waiting at the start, in GPUs over the cluster's: it is full at once
    load: float = 1.1  # GPU-hours the stream offers over what the GPUs can run while jobs arrive
    stated: float = 0.75  # share of small jobs that state an expected runtime
    time_scale: float = 1.0  # multiplies every runtime (a test shrinks hours to minutes)
    teams: int = 2  # queues sharing the cluster equally; the gang is in the first
    gang_preemptible: bool = True  # False: its PodGroup says non-preemptible, so no reclaim takes it once up


def team_names(teams: int) -> tuple[str, ...]:
    return tuple(f"team-{chr(ord('a') + i)}" for i in range(teams))


def queues(gpus: float, teams: int) -> tuple[Queue, ...]:
    """The teams, each deserving an equal part of the GPUs, none capped."""
    part = QueueResource(quota=math.floor(gpus / teams), over_quota_weight=1, limit=-1)
    return tuple(
        Queue(team, None, gpu=part, cpu=UNLIMITED, memory=UNLIMITED, created=float(i))
        for i, team in enumerate(team_names(teams))
    )


def small_job(rng: random.Random, name: str, arrival: float, size: StarvedGang) -> JobSpec:
    gpus = float(rng.choice(GPUS_PER_JOB))
    roll, median = rng.random(), RUNTIMES[-1][1]
    for share, candidate in RUNTIMES:
        if roll < share:
            median = candidate
            break
        roll -= share
    duration = size.time_scale * median * math.exp(rng.gauss(0.0, SIGMA))
    expected = float(math.ceil(duration * RUNTIME_MARGIN / 60) * 60) if rng.random() < size.stated else None
    return JobSpec(
        name=name,
        kind="gpu" if gpus == 1 else "multi-gpu",
        queue=rng.choice(team_names(size.teams)),
        pods=1,
        min_member=1,
        gpus=gpus,
        fraction=None,
        cpu_millis=8000 * gpus,
        memory_bytes=64 * GIB * gpus,
        priority_class="train",
        arrival=arrival,
        duration=duration,
        expected_runtime=expected,
    )


def gang(size: StarvedGang) -> JobSpec:
    """The large gang: one-GPU pods, all of them needed at once, an hour's work (stated). As
    preemptible as its priority class says, unless the size says otherwise: once up, a
    preemptible gang takes its team above its fair share, and the other team's reclaim may take
    it down again (KAI's rules); a non-preemptible one stays, being within its team's quota."""
    return JobSpec(
        name="big-gang",
        kind="training",
        queue=GANG_QUEUE,
        pods=size.gang_pods,
        min_member=size.gang_pods,
        gpus=1,
        fraction=None,
        cpu_millis=8000,
        memory_bytes=64 * GIB,
        priority_class="train",
        arrival=size.gang_arrival,
        duration=size.time_scale * 3600.0,
        expected_runtime=size.time_scale * 3600.0 * RUNTIME_MARGIN,
        preemptible=None if size.gang_preemptible else False,
    )


def workload(size: StarvedGang, gpus: float, seed: int) -> Workload:
    """A backlog of small jobs at the start, more arriving as a Poisson stream at ``size.load``
    for the whole run, and the gang."""
    rng = random.Random(seed)
    jobs: list[JobSpec] = []
    waiting = 0.0
    while waiting < size.backlog * gpus:
        jobs.append(small_job(rng, f"job-{len(jobs):05d}", 0.0, size))
        waiting += jobs[-1].gpus
    rate = size.load * gpus / (size.time_scale * _mean_gpu_seconds())  # jobs per second offering the load
    clock = rng.expovariate(rate)
    while clock <= size.hours * 3600:
        jobs.append(small_job(rng, f"job-{len(jobs):05d}", clock, size))
        clock += rng.expovariate(rate)
    jobs.append(gang(size))
    jobs.sort(key=lambda j: j.arrival)
    return Workload(queues(gpus, size.teams), tuple(jobs))


def _mean_gpu_seconds() -> float:
    """A small job's mean GPU-seconds (a log-normal's mean is its median times exp(sigma^2 / 2))."""
    mean_gpus = sum(GPUS_PER_JOB) / len(GPUS_PER_JOB)
    mean_runtime = sum(share * median * math.exp(SIGMA**2 / 2) for share, median in RUNTIMES)
    return mean_gpus * mean_runtime
