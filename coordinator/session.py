"""A session's state: the node table, jobs, tasks and queue shares it decides on, and the
questions every action asks of them (a pod's shape and quota, a job's request, a queue's
capacity). ``coordinator.session_open`` builds one from a snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from coordinator.dra_session import DraView
from coordinator.gpu_request import node_quota_gpus, requested_gpus
from coordinator.jobs import Job
from coordinator.min_runtime import MinRuntimes
from coordinator.plugins import SessionHooks, hooks_for
from coordinator.queue_state import CapacityVerdict, QueueState
from coordinator.semi_preemptible import places_core, protected_subject
from coordinator.tasks import PlacedHolds, Task
from coordinator.victim_searches import VictimSearches
from kai_ray import labels as L
from kai_ray.config import SchedulerConfig
from kai_ray.model import Pod, Topology, mig_gpus
from placement.diagnosis import Diagnosis
from placement.dra_demand import ClaimDemand
from placement.node_table import NodeTable
from placement.placer import Mask, Placer
from placement.shapes import TaskShape

if TYPE_CHECKING:
    from coordinator.rounds import RoundPlacer

if TYPE_CHECKING:
    from coordinator.topology import SessionDomains

Quota = tuple[float, float, float]


@dataclass(slots=True)
class SessionState:
    config: SchedulerConfig
    now: float
    table: NodeTable
    placer: Placer
    queues: QueueState
    jobs: dict[str, Job]
    tasks: dict[str, Task]
    jobs_by_task: dict[str, Job]
    all_pods: Mapping[str, Pod]  # every pod of the cluster, by key
    pod_notes: dict[str, str] = field(default_factory=dict)  # why a pod is not schedulable at all
    # The distinct GPU memory sizes (MiB per GPU) of the cluster's nodes: the per-node capacity
    # predicate asks a different amount on each (``coordinator/gpu_request.py``).
    gpu_memory_kinds: tuple[float, ...] = ()
    last_start: dict[str, float] = field(default_factory=dict)
    remote_diagnoses: dict[TaskShape, Diagnosis] = field(default_factory=dict)  # nodes outside this table
    placer_type: type[Placer] = Placer  # how pods find nodes (benchmarks swap in a full scan)
    source: RoundPlacer | None = None  # allocate's placements, from the shards' streams
    unplaced: dict[str, tuple[Task, str]] = field(default_factory=dict)  # job -> failing task, reason before why
    shard_diagnoses: dict[TaskShape, Diagnosis] = field(default_factory=dict)  # every node, from the shards
    unusable_queues: Mapping[str, str] = field(default_factory=dict)  # queues that exist outside the tree
    topologies: dict[str, Topology] = field(default_factory=dict)
    domains: SessionDomains | None = None  # topology domains, merged from the shards' reports
    min_runtimes: MinRuntimes = field(default_factory=lambda: MinRuntimes({}, {}, {}))
    dra: DraView = field(default_factory=DraView)  # ResourceClaims and classes (coordinator/dra_session.py)
    pending_seen: list[Job] | None = None  # see pending_jobs
    # Our pods that were pending when the session opened, where the opener keeps them (the
    # session cache does): saves a walk over every pod to find them.
    pending_at_open: Sequence[Task] | None = None
    # The jobs stale as their records stand or with a stale-since time, where the opener keeps
    # them (None: look at every job); with the jobs the session changes, what can be stale.
    stale_watch: frozenset[str] | None = None
    # Where the opener counts them, changes to which pods and jobs exist and who belongs where:
    # the same count, the same pod-to-job maps (None: not counted).
    membership: int | None = None
    not_ready_at_open: frozenset[str] | None = None  # gangs short of pods at the start, where counted
    # The pods whose records (or jobs) changed since the last session, where the opener knows
    # (None: anything may have changed), and the jobs made again or gone since then.
    changed_pods: frozenset[str] | None = None
    remade_jobs: frozenset[str] = frozenset()
    # The jobs the opener reset to their records (what the last session may have changed), where
    # it reset only some (None: every job).
    reset_jobs: frozenset[str] | None = None
    # Which opener opened the session, and its count of sessions so far (None: opened from scratch):
    # the changes above are relative to that opener's previous session only.
    opened: tuple[int, int] | None = None
    positions: Mapping[str, int] | None = None  # job -> its place in ``jobs``, where the opener keeps it
    largest_node_gpus: float | None = None  # the most GPUs any node has, where the opener knows
    # Moves the session onto every node's row when it started on none (the shards placed for
    # allocate). The coordinator sets it; an action calls it just before it looks at nodes
    # beyond what allocate placed, so a cycle whose actions find nothing to search never pays
    # for copying every node's row and re-holding every running pod on it.
    every_node: Callable[[], None] = field(default=lambda: None)
    # The session was moved onto every node's row (``session_rebase``): its untouched tasks know
    # their holdings there lazily, and nothing else of theirs changed.
    rebased: bool = False
    # The table the session's tasks hold on as their records say, shared by every task (moved by
    # ``session_rebase``): the opener makes the tasks with this very object.
    placed_holds: PlacedHolds = field(default_factory=PlacedHolds)
    searches: VictimSearches = field(default_factory=VictimSearches)  # the victim searches' record
    # The job an action is deciding now, set as it takes each one: when the action raises, that
    # job is set aside for the rest of the session and the action runs again without it.
    deciding: str | None = None
    set_aside: dict[str, str] = field(default_factory=dict)  # job -> the error met while deciding it

    @property
    def hooks(self) -> SessionHooks:
        """The extension points the config's plugins registered (``coordinator.plugins``)."""
        return hooks_for(self.config.resolved_plugins)

    def pending_jobs(self) -> list[Job]:
        """The jobs that may have pending pods: those that had some when first asked. A session
        only takes pods out of Pending (an undo puts back what was pending before), so no other
        job can gain one; callers still ask each job (``has_pending``). Saves every action a
        walk over every job of the cluster."""
        if self.pending_seen is None:
            if self.pending_at_open is None:
                self.pending_seen = [job for job in self.jobs.values() if job.has_pending()]
            else:  # the jobs of the pods pending at the start
                keys = {job.key for t in self.pending_at_open if (job := self.jobs_by_task.get(t.key)) is not None}
                self.pending_seen = [job for job in self.in_session_order(keys) if job.has_pending()]
        return self.pending_seen

    def in_session_order(self, keys: Iterable[str]) -> list[Job]:
        """These jobs (those that exist), in the order of ``jobs``."""
        positions = self.positions
        if positions is None:
            wanted = set(keys)
            return [job for key, job in self.jobs.items() if key in wanted]
        return [self.jobs[key] for key in sorted((k for k in keys if k in self.jobs), key=positions.__getitem__)]

    def maybe_changed_jobs(self, touched: set[str]) -> Iterable[Job]:
        """In session order, the jobs that may differ from what their records say: those with
        pending pods (placing them changes their gang and start time), those a statement changed
        (``touched``) and those the opener saw stale or timed. Every job when the opener keeps no
        such watch."""
        if self.stale_watch is None:
            return self.jobs.values()
        return self.in_session_order(self.maybe_changed_keys(touched))

    def jobs_changed_since_last_session(self) -> frozenset[str] | None:
        """The jobs that may differ from how the last session left them (made again or gone, reset,
        or with a pod whose record changed), where the opener knows (None: any job may)."""
        if self.changed_pods is None or self.reset_jobs is None:
            return None
        of_pods = {job.key for pod in self.changed_pods if (job := self.jobs_by_task.get(pod)) is not None}
        return self.reset_jobs | self.remade_jobs | of_pods

    def maybe_changed_keys(self, touched: set[str]) -> set[str]:
        """The keys of ``maybe_changed_jobs`` (every job's when the opener keeps no watch)."""
        if self.stale_watch is None:
            return set(self.jobs)
        return set(self.stale_watch) | touched | {job.key for job in self.pending_jobs()}

    def claims_of(self, task: Task) -> ClaimDemand:
        """What the pod's claims ask now: allocations and deallocations made in this session count."""
        return self.dra.demand(task.pod, self.table.devices)

    def shape_for(self, task: Task) -> TaskShape:
        """The pod's shape with its claims as they stand in this session (a claim another pod
        allocated a moment ago pins this one to that node and asks for no device)."""
        if not task.pod.resource_claims:
            return task.shape
        return TaskShape.of_pod(task.pod, self.claims_of(task))

    def claim_gpus(self, task: Task) -> float:
        """GPUs of the pod's claims it would be charged for if placed now: those it allocates, and
        allocated ones it joins that no placed pod uses (a claim is charged to one user only)."""
        demand = self.claims_of(task)
        joined = 0.0
        for key in demand.joins:
            claim = self.dra.claims.get(key)
            if claim is not None and not self.table.devices.users.get(key):
                joined += claim.gpus
        return demand.gpus + joined

    def claim_problem(self, task: Task) -> str | None:
        if not task.pod.resource_claims:
            return None
        job = self.jobs_by_task.get(task.key)
        return self.dra.problem(task.pod, job.queue if job else "", L.QUEUE_LABEL, self.table.devices)

    def explain(self, shape: TaskShape) -> str:
        """Why no node takes ``shape``: this table's nodes now, plus what the shards said of the rest."""
        diagnosis = self.placer.diagnose(shape)
        remote = self.remote_diagnoses.get(shape)
        return (diagnosis.merged(remote) if remote is not None else diagnosis).describe(shape)

    def requested_quota(self, task: Task) -> Quota:
        """What a pending pod asks of its queue (``requested_gpus``: a GPU-memory request asks
        no GPUs until a node is chosen)."""
        pod = task.pod
        gpu = requested_gpus(pod)
        if pod.resource_claims:
            gpu += self.claim_gpus(task)
        return (gpu, pod.requests.cpu, pod.requests.memory)

    def accepted_quota(self, task: Task, row: int) -> Quota:
        """What a pod placed on table row ``row`` holds of its queue (with the GPUs of the claims
        it is about to allocate)."""
        gpu, cpu, memory = accepted_on(task, float(self.table.gpu_mem[row]))
        if task.pod.resource_claims:
            gpu += self.claim_gpus(task)
        return (gpu, cpu, memory)

    def job_request(self, job: Job, real: bool = False) -> np.ndarray:
        """What the job's next tasks to allocate ask of its queue (KAI's job init request)."""

        def compute() -> np.ndarray:
            # Summed as floats, in the order numpy would add them: one array made, not one per pod.
            gpu = cpu = memory = 0.0
            for task in job.tasks_to_allocate(real):
                task_gpu, task_cpu, task_memory = self.requested_quota(task)
                gpu += task_gpu
                cpu += task_cpu
                memory += task_memory
            return np.array((gpu, cpu, memory))

        return job.cached(("request", real), compute)

    def placing_preemptible(self, job: Job) -> bool:
        """Whether the pods ``job`` places next count as preemptible work for queue quotas: a
        semi-preemptible job's do once its minimum is placed, not before (a stand-in for part of
        a job, as victim searches make, is judged by the job itself)."""
        if not job.semi_preemptible:
            return job.preemptible
        return not places_core(self.jobs.get(job.key, job))

    def protected_subject(self, job: Job) -> str:
        """How a quota refusal names the non-preemptible work ``job`` would add."""
        return protected_subject(job) if job.semi_preemptible else "non-preemptible job"

    def capacity(self, job: Job, request: Sequence[float] | np.ndarray, limits: bool = True) -> CapacityVerdict:
        """KAI's queue capacity check for the pods ``job`` places next (``request``)."""
        return self.queues.check_capacity(
            job.queue, request, self.placing_preemptible(job), limits, self.protected_subject(job)
        )

    def quota_rows(self, job: Job, task: Task) -> Mask | None:
        """The table rows where KAI's per-node capacity predicate lets ``task`` go, as its
        queues stand now (None: every row). Nodes differ only by their GPUs' memory here."""
        if self.queues.never_full(job.queue, self.placing_preemptible(job)):
            return None
        pod = task.pod
        refused = [
            mib
            for mib in self.gpu_memory_kinds
            if not self.capacity(job, (node_quota_gpus(pod, mib), pod.requests.cpu, pod.requests.memory)).ok
        ]
        if not refused:
            return None
        return ~np.isin(self.table.gpu_mem, refused)

    def quota_may_refuse(self, job: Job, tasks: Sequence[Task]) -> bool:
        """Whether the per-node predicate could refuse some node to one of ``tasks`` placed in
        turn: each pod's largest per-node amount and the most it can then hold, summed, fail the
        capacity check. Placements that do not look at every node (the shards' streams) are
        right only when it cannot."""
        if self.queues.never_full(job.queue, self.placing_preemptible(job)):
            return False
        worst = [0.0, 0.0, 0.0]
        for task in tasks:
            pod = task.pod
            worst[0] += max(
                (max(node_quota_gpus(pod, mib), accepted_on(task, mib)[0]) for mib in self.gpu_memory_kinds),
                default=0.0,
            )
            worst[1] += pod.requests.cpu
            worst[2] += pod.requests.memory
        return not self.capacity(job, worst).ok

    def job_allocated(self, job: Job) -> np.ndarray:
        """What a victim job gives back in the victims queue's order: KAI's ``victim.Allocated``,
        its pods bound or about to be (``AllocatedStatus``). A pipelined pod, such as one an
        earlier search of the session moved, is not counted, though its queue's allocation holds it."""

        def compute() -> np.ndarray:
            total = np.zeros(3)
            for task in job.tasks:
                if task.status.counts_as_queue_allocation:
                    total += task.accepted
            return total

        return job.cached("allocated", compute)


def accepted_on(task: Task, device_mib: float) -> Quota:
    """What a placed pod holds of its queue, with its fraction measured on its node's GPUs and
    its MIG instances as their profiles' GPUs."""
    pod = task.pod
    gpu = pod.requests.gpu + mig_gpus(pod.requests.scalars)
    share = pod.gpu_share
    if share is not None:
        gpu += share.devices * share.accepted_portion(max(device_mib, 1.0))
    return (gpu, pod.requests.cpu, pod.requests.memory)
