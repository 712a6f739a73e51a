"""A synthetic but realistic workload: a queue tree and a seeded stream of jobs.

The queue tree is departments -> teams, with GPU quotas that add up to most of the
cluster, over-quota weights of 1 or 2, and one team capped by a limit, so fair share,
over-quota sharing and reclaim all have something to do. CPU and memory quotas are -1
(deserve what is requested), as most GPU clusters configure them.

Jobs arrive as a Poisson stream and run for log-normally distributed times. The mix is
what shared GPU clusters see: distributed training gangs (2-64 pods, some elastic),
single- and multi-GPU jobs, fractional inference and notebook pods (0.25/0.5 GPU), and
CPU jobs, under KAI's priority classes (train 50, build-preemptible 75, build 100,
inference 125). Everything follows from the seed.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace

from kai_ray.labels import PREEMPTIBLE_BELOW
from kai_ray.model import GpuShare, Pod, PodGroup, Queue, QueueResource, ResourceVector, Toleration

GIB = 2**30
NAMESPACE = "sim"
KWOK_TOLERATION = Toleration("kwok.x-k8s.io/node", "Exists", "", "NoSchedule")
PRIORITY_CLASSES = {"train": 50, "build-preemptible": 75, "build": 100, "inference": 125}
UNLIMITED = QueueResource(quota=-1, over_quota_weight=1, limit=-1)


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job of the stream: what it asks for, when it arrives and how long it runs."""

    name: str
    kind: str  # training | gpu | multi-gpu | fraction | cpu
    queue: str
    pods: int
    min_member: int
    gpus: float  # whole GPUs per pod
    fraction: float | None  # portion of one GPU per pod, for shared-GPU pods
    cpu_millis: float
    memory_bytes: float
    priority_class: str
    arrival: float  # simulated seconds
    duration: float  # simulated seconds of running once the gang is up
    dra: bool = False  # its GPUs come through a ResourceClaim (kai_ray/app/sim/dra.py), not nvidia.com/gpu
    expected_runtime: float | None = None  # what its PodGroup's kai.scheduler/expected-runtime says
    preemptible: bool | None = None  # its PodGroup's spec.preemptibility; None: as its priority says

    @property
    def is_preemptible(self) -> bool:
        return self.priority < PREEMPTIBLE_BELOW if self.preemptible is None else self.preemptible

    @property
    def priority(self) -> int:
        return PRIORITY_CLASSES[self.priority_class]

    @property
    def gpu_per_pod(self) -> float:
        return self.fraction if self.fraction is not None else self.gpus

    def pod_group(self) -> PodGroup:
        return PodGroup(
            NAMESPACE,
            self.name,
            self.queue,
            self.priority,
            self.is_preemptible,
            self.min_member,
            priority_class_name=self.priority_class,
            created=self.arrival,
            uid=f"pg-{self.name}",
            expected_runtime_seconds=self.expected_runtime,
        )

    def pod(self, index: int, incarnation: int = 0) -> Pod:
        """Pod ``index`` of the job, pending; ``incarnation`` > 0 when a controller re-created it."""
        share = GpuShare(fraction=self.fraction) if self.fraction is not None else None
        return Pod(
            NAMESPACE,
            f"{self.name}-{index}",
            uid=f"{self.name}-{index}-{incarnation}",
            requests=ResourceVector.of(
                cpu=self.cpu_millis, memory=self.memory_bytes, gpu=0 if share or self.dra else self.gpus, pods=1
            ),
            gpu_share=share,
            tolerations=(KWOK_TOLERATION,),
            created=self.arrival,
            pod_group=self.name,
            queue_label=self.queue,
            priority_class_name=self.priority_class,
        )


@dataclass(frozen=True, slots=True)
class Workload:
    queues: tuple[Queue, ...]
    jobs: tuple[JobSpec, ...]  # in arrival order

    @property
    def leaf_queues(self) -> tuple[str, ...]:
        parents = {q.parent for q in self.queues}
        return tuple(q.name for q in self.queues if q.name not in parents)

    @property
    def pods(self) -> int:
        return sum(job.pods for job in self.jobs)


def queue_tree(total_gpus: float, departments: int = 3, teams_per_department: int = 2) -> tuple[Queue, ...]:
    """Departments share 90% of the GPUs as quota, unevenly; teams split their department's."""
    queues: list[Queue] = []
    dept_weights = [departments - d + 1 for d in range(departments)]  # first departments are bigger
    created = 0.0
    for d, dept_weight in enumerate(dept_weights):
        dept = f"dept-{d + 1}"
        dept_quota = math.floor(0.9 * total_gpus * dept_weight / sum(dept_weights))
        queues.append(
            Queue(dept, None, gpu=QueueResource(dept_quota, 1, -1), cpu=UNLIMITED, memory=UNLIMITED, created=created)
        )
        created += 1
        for t in range(teams_per_department):
            team_quota = math.floor(dept_quota / teams_per_department)
            weight = 2.0 if t == 0 else 1.0
            limit = -1.0 if (d, t) != (0, teams_per_department - 1) else float(math.ceil(team_quota * 1.5))
            queues.append(
                Queue(
                    f"{dept}-team-{t + 1}",
                    dept,
                    gpu=QueueResource(team_quota, weight, limit),
                    cpu=UNLIMITED,
                    memory=UNLIMITED,
                    created=created,
                )
            )
            created += 1
    return tuple(queues)


def generate(
    total_gpus: float,
    seed: int,
    jobs: int | None = None,
    arrival_window: float | None = None,
    load: float = 1.0,
    has_gpu_nodes: bool = True,
    dra_share: float = 0.0,
) -> Workload:
    """A seeded job stream whose GPU-hours offer ``load`` times what the cluster's GPUs can run
    while the jobs arrive. Give ``jobs`` (the window follows), ``arrival_window`` in simulated
    seconds (as many jobs as the load asks for), or both (then ``load`` is ignored)."""
    if jobs is None and arrival_window is None:
        raise ValueError("give the number of jobs, the arrival window or both")
    rng = random.Random(seed)
    queues = queue_tree(total_gpus)
    leaves = [q.name for q in queues if q.parent is not None]
    budget = load * total_gpus * arrival_window if jobs is None and arrival_window is not None else math.inf
    clock, asked = 0.0, 0.0
    unit_times: list[float] = []
    specs: list[JobSpec] = []
    while (len(specs) < jobs) if jobs is not None else (asked < budget):
        clock += rng.expovariate(1.0)  # a Poisson stream at rate 1, stretched to the window below
        unit_times.append(clock)
        job = _job(rng, f"job-{len(specs):05d}", rng.choice(leaves), 0.0, has_gpu_nodes, total_gpus / 10)
        if dra_share > 0 and job.kind in ("gpu", "multi-gpu") and rng.random() < dra_share:
            job = replace(job, dra=True)  # the same GPUs, asked for through a ResourceClaim
        specs.append(job)
        asked += job.pods * job.gpu_per_pod * job.duration
    if arrival_window is None:
        arrival_window = asked / (load * total_gpus) if total_gpus > 0 and load > 0 else 3600.0
    scale = arrival_window / clock if clock > 0 else 0.0
    timed = tuple(replace(job, arrival=t * scale) for job, t in zip(specs, unit_times, strict=True))
    return Workload(queues, timed)


def offered_load(workload: Workload, total_gpus: float) -> float:
    """GPU-seconds the jobs ask for over GPU-seconds the cluster has while they arrive."""
    window = workload.jobs[-1].arrival if workload.jobs else 0.0
    asked = sum(job.pods * job.gpu_per_pod * job.duration for job in workload.jobs)
    return asked / (total_gpus * window) if total_gpus > 0 and window > 0 else 0.0


def _lognormal(rng: random.Random, median_seconds: float, sigma: float = 0.6) -> float:
    return float(median_seconds * math.exp(rng.gauss(0.0, sigma)))


def _job(
    rng: random.Random, name: str, queue: str, arrival: float, has_gpu_nodes: bool, max_gang_gpus: float
) -> JobSpec:
    roll = rng.random() if has_gpu_nodes else 0.99
    if roll < 0.08:  # distributed training: a gang, sometimes elastic, at most a tenth of the GPUs
        pods = rng.choice((2, 2, 4, 4, 4, 8, 8, 16, 32, 64))
        gpus = 8.0 if pods >= 8 else float(rng.choice((1, 2, 4, 8)))
        while pods > 2 and pods * gpus > max_gang_gpus:
            pods //= 2
        elastic = rng.random() < 0.25
        min_member = max(1, pods // 2) if elastic else pods
        return JobSpec(
            name,
            "training",
            queue,
            pods,
            min_member,
            gpus,
            None,
            8000 * gpus,
            64 * GIB * gpus,
            "train",
            arrival,
            _lognormal(rng, 1.5 * 3600),
        )
    if roll < 0.52:  # one GPU: experiments and batch jobs
        cls = rng.choice(("train", "train", "train", "build-preemptible"))
        return JobSpec(name, "gpu", queue, 1, 1, 1.0, None, 8000, 32 * GIB, cls, arrival, _lognormal(rng, 1800))
    if roll < 0.64:  # a multi-GPU pod
        gpus = float(rng.choice((2, 4, 8)))
        return JobSpec(
            name,
            "multi-gpu",
            queue,
            1,
            1,
            gpus,
            None,
            8000 * gpus,
            48 * GIB * gpus,
            "train",
            arrival,
            _lognormal(rng, 2 * 3600),
        )
    if roll < 0.85:  # shared GPUs: inference servers and notebooks
        fraction = rng.choice((0.25, 0.5))
        cls = rng.choice(("inference", "build", "build-preemptible"))
        pods = rng.choice((1, 1, 2)) if cls == "inference" else 1
        return JobSpec(
            name, "fraction", queue, pods, pods, 0.0, fraction, 2000, 16 * GIB, cls, arrival, _lognormal(rng, 3600)
        )
    pods = rng.choice((1, 1, 2, 4))  # CPU-only data preparation
    return JobSpec(
        name,
        "cpu",
        queue,
        pods,
        pods,
        0.0,
        None,
        rng.choice((2000, 4000, 8000)),
        8 * GIB,
        "train",
        arrival,
        _lognormal(rng, 900),
    )
