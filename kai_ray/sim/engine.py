"""Simulated time around the real scheduler: jobs arrive, pods run, finish and are evicted.

The simulator plays the parts of the API server, the kubelets and the job controllers;
the scheduler it drives is the real coordinator with real shards (in-process or Ray
actors), fed the same batched deltas the Kubernetes adapter feeds it. Nothing inside the
scheduler is faked.

- A job arrives: its PodGroup and pending pods are created.
- A cycle binds pods: they run at once (the watch confirms the bind). Once a job has
  ``minMember`` pods running its clock starts; it finishes ``duration`` later and its pods
  are removed.
- A cycle evicts pods: they turn Releasing and disappear after the eviction grace delay;
  the job's controller re-creates them as pending pods. A job that loses its gang stops
  its clock and starts over (with its whole duration) when it is running again.

Cycles run every ``period`` simulated seconds while anything can change; when nothing
happened and nothing can, time jumps to the next arrival, completion or release.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from coordinator.coordinator import CycleResult
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import DraChanges, DraObjects, Node, Pod, PodGroup, PodState, Queue, ResourceClaim
from kai_ray.sim.dra import CLAIM, DeviceLedger, claim_for, claimed
from kai_ray.sim.report import SimMetrics
from kai_ray.sim.usage import SimUsage
from kai_ray.sim.workload import NAMESPACE, JobSpec, Workload


class Scheduler(Protocol):
    """What the simulator needs of a coordinator (in-process or a Ray actor proxy)."""

    def step(self, deltas: ClusterDeltas, now: float, actions: Sequence[str] | None = None) -> CycleResult:
        """Apply the changes, then run one scheduling cycle."""
        ...


@dataclass(frozen=True, slots=True)
class SimSettings:
    period: float = 10.0  # simulated seconds between cycles while something can change
    horizon: float = 6 * 3600.0  # simulated seconds to run
    eviction_grace: float = 30.0  # an evicted pod holds its resources this long
    recheck: float = 60.0  # with pending pods but no changes, cycle again after this long (time-based rules)


@dataclass(slots=True)
class JobRun:
    spec: JobSpec
    running: set[int] = field(default_factory=set)  # pod indexes bound and not evicted
    started_at: float | None = None  # when its gang came up (current attempt)
    first_start: float | None = None
    epoch: int = 0  # bumps when the clock stops, so a stale finish event is ignored
    finished_at: float | None = None
    incarnations: dict[int, int] = field(default_factory=dict)  # pod index -> times re-created


class Simulation:
    def __init__(
        self,
        scheduler: Scheduler,
        nodes: Sequence[Node],
        workload: Workload,
        settings: SimSettings | None = None,
        on_step: Callable[[float], None] | None = None,
        dra: DraObjects | None = None,
        usage: SimUsage | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.usage = usage  # time-based fair share: usage accounted in simulated time
        self.nodes = {n.name: n for n in nodes}
        self.workload = workload
        self._specs = {job.name: job for job in workload.jobs}
        self.settings = settings or SimSettings()
        self.on_step = on_step
        self.jobs: dict[str, JobRun] = {}
        self.pods: dict[str, Pod] = {}  # live pods as the API server would hold them
        self.metrics = SimMetrics(nodes, workload)
        self._events: list[tuple[float, int, str, str, int]] = []  # time, seq, kind, subject, tag
        self._seq = itertools.count()
        self._deltas = _DeltaBuffer()
        self.last_result: CycleResult | None = None
        self.dra = dra or DraObjects()
        self.devices = DeviceLedger()  # which claim holds which DRA device, by the simulator's count
        # DRA GPUs are the cluster's GPUs too: in its capacity, and in use while a claim holds them.
        self.metrics.gpu_capacity += sum(len(s.devices) for s in self.dra.slices)

    # ------------------------------------------------------------------ events
    def _at(self, when: float, kind: str, subject: str, tag: int = 0) -> None:
        heapq.heappush(self._events, (when, next(self._seq), kind, subject, tag))

    def _due(self, now: float) -> None:
        while self._events and self._events[0][0] <= now:
            _, _, kind, subject, tag = heapq.heappop(self._events)
            if kind == "arrive":
                self._arrive(subject)
            elif kind == "finish":
                self._finish(subject, tag, now)
            elif kind == "released":
                self._released(subject, tag)

    def _arrive(self, name: str) -> None:
        spec = self._specs[name]
        run = self.jobs[name] = JobRun(spec)
        self.metrics.job_arrived(spec)
        self._deltas.groups.append(spec.pod_group())
        for index in range(spec.pods):
            pod = self._with_claim(spec, spec.pod(index))
            self.pods[pod.key] = pod
            self._deltas.upsert(pod)
            run.incarnations[index] = 0

    def _with_claim(self, spec: JobSpec, pod: Pod) -> Pod:
        """A DRA job's pod with its own claim (made as the claim controller makes one)."""
        if not spec.dra:
            return pod
        self._deltas.claims[f"{pod.namespace}/{pod.name}-{CLAIM}"] = claim_for(pod, int(spec.gpus))
        return claimed(pod)

    def _drop_claim(self, pod: Pod) -> None:
        for pod_claim in pod.resource_claims:
            key = f"{pod.namespace}/{pod_claim.claim}"
            self.metrics.gpus_in_use -= self.devices.release(key)
            self._deltas.claims[key] = None

    def _finish(self, name: str, epoch: int, now: float) -> None:
        run = self.jobs[name]
        if run.epoch != epoch or run.finished_at is not None:
            return  # the job lost its gang after this was scheduled
        run.finished_at = now
        for index in range(run.spec.pods):
            key = _pod_key(run.spec, index)
            pod = self.pods.pop(key, None)
            if pod is not None:
                self.metrics.pod_left(pod)
                self._deltas.remove(key)
                self._drop_claim(pod)
        run.running.clear()
        self._deltas.groups_removed.append(f"{NAMESPACE}/{name}")
        self.metrics.job_finished(run.spec, now)

    def _released(self, key: str, incarnation: int) -> None:
        """An evicted pod is gone; its job's controller creates it again, pending."""
        pod = self.pods.get(key)
        if pod is None or pod.state is not PodState.RELEASING:
            return
        self.metrics.pod_left(pod)
        self._drop_claim(pod)
        run = self.jobs[pod.pod_group or ""]
        index = _pod_index(key)
        run.incarnations[index] = incarnation
        fresh = self._with_claim(run.spec, run.spec.pod(index, incarnation))
        self.pods[key] = fresh
        self._deltas.upsert(fresh)

    # ------------------------------------------------------------------ decisions
    def _take(self, result: CycleResult, now: float) -> None:
        touched: set[str] = set()
        for bind in result.binds:
            pod = self.pods.get(bind.pod)
            if pod is None or pod.state is not PodState.PENDING:
                continue  # gone meanwhile; the coordinator learns it from the next deltas
            bound = replace(pod, state=PodState.RUNNING, node=bind.node, gpu_groups=bind.gpu_groups)
            for grant in bind.claims:  # the binder's write: the claim's allocation, reserved for the pod
                self.devices.allocate(grant.claim, grant.allocation)
                self.metrics.gpus_in_use += len(grant.allocation.results)
                claim = self._deltas.claims.get(grant.claim) or self._claims.get(grant.claim)
                if claim is not None:
                    self._deltas.claims[grant.claim] = replace(
                        claim, allocation=grant.allocation, reserved_for=(pod.name,)
                    )
            self.pods[bind.pod] = bound
            self._deltas.upsert(bound)
            self.metrics.pod_bound(bound, now)
            run = self.jobs[pod.pod_group or ""]
            run.running.add(_pod_index(bind.pod))
            touched.add(run.spec.name)
        for eviction in result.evictions:
            pod = self.pods.get(eviction.pod)
            if pod is None or pod.state is not PodState.RUNNING:
                continue
            leaving = replace(pod, state=PodState.RELEASING)
            self.pods[eviction.pod] = leaving
            self._deltas.upsert(leaving)
            self.metrics.pod_evicted(eviction.action)
            run = self.jobs[pod.pod_group or ""]
            run.running.discard(_pod_index(eviction.pod))
            touched.add(run.spec.name)
            self._at(
                now + self.settings.eviction_grace,
                "released",
                eviction.pod,
                run.incarnations.get(_pod_index(eviction.pod), 0) + 1,
            )
        newly_bound = {b.pod for b in result.binds}
        decided = result.decisions.pods
        for name in touched:
            run = self.jobs[name]
            keys = [_pod_key(run.spec, i) for i in range(run.spec.pods)]
            if any(key in newly_bound for key in keys):
                # The gang contract: what runs plus what waits pipelined on releasing capacity (it
                # binds as soon as that frees) reaches minMember; fewer is a half-bound gang.
                pipelined = sum(1 for key in keys if (d := decided.get(key)) is not None and d.status == "Pipelined")
                if len(run.running) + pipelined < run.spec.min_member:
                    self.metrics.partial_gangs += 1
            self._update_clock(run, now)

    def _update_clock(self, run: JobRun, now: float) -> None:
        gang_up = len(run.running) >= run.spec.min_member
        if gang_up and run.started_at is None:
            run.started_at = now
            if run.first_start is None:
                run.first_start = now
                self.metrics.job_started(run.spec, now)
            self._at(now + run.spec.duration, "finish", run.spec.name, run.epoch)
        elif not gang_up and run.started_at is not None:
            run.started_at = None
            run.epoch += 1  # the pending finish event no longer counts
            self.metrics.restarts += 1

    # ------------------------------------------------------------------ loop
    def run(self) -> SimMetrics:
        settings = self.settings
        for job in self.workload.jobs:
            self._at(job.arrival, "arrive", job.name)
        self._deltas.nodes.extend(self.nodes.values())
        self._deltas.queues.extend(self.workload.queues)
        self._deltas.dra = self.dra
        now, last_cycle, changed = 0.0, -math.inf, True
        started = time.perf_counter()
        while now <= settings.horizon:
            self._due(now)
            pending = any(p.state is PodState.PENDING for p in self.pods.values())
            refresh = self.usage is not None and pending and self.usage.due(now)  # fair shares move with time
            if self._deltas or changed or refresh or (pending and now - last_cycle >= settings.recheck):
                changed = self._cycle(now)
                last_cycle = now
            self.metrics.sample(now)
            if self.on_step is not None:
                self.on_step(now)
            now = self._next_time(now, changed, pending, last_cycle)
        self.metrics.finish(
            min(now, settings.horizon), self.pods.values(), self.last_result, time.perf_counter() - started
        )
        return self.metrics

    @property
    def _claims(self) -> dict[str, ResourceClaim]:
        return self._deltas.known_claims

    def _cycle(self, now: float) -> bool:
        deltas = self._deltas.take()
        usage = self.usage.for_cycle(now) if self.usage is not None else None
        if usage is not None:
            deltas = replace(deltas, queue_usage=usage)
        wall = time.perf_counter()
        result = self.scheduler.step(deltas, now)
        wall = time.perf_counter() - wall
        self.last_result = result
        if self.usage is not None:
            self.usage.after(now, result)
        self.metrics.cycle(now, wall, result)
        self._take(result, now)
        return bool(result.binds or result.evictions)

    def _next_time(self, now: float, changed: bool, pending: bool, last_cycle: float) -> float:
        """The next cycle time on the period grid: the next step if something may still move,
        else the next event (or recheck) time, so idle stretches cost nothing."""
        step = self.settings.period
        if changed or self._deltas:
            return now + step
        upcoming = [self._events[0][0]] if self._events else []
        if pending:
            upcoming.append(last_cycle + self.settings.recheck)
            if self.usage is not None:
                upcoming.append(self.usage.next_time())
        if not upcoming:
            return self.settings.horizon + step
        return max(now + step, math.ceil(min(upcoming) / step) * step)


class _DeltaBuffer:
    """Changes since the last cycle, collapsed per pod (the last write wins)."""

    def __init__(self) -> None:
        self.known_claims: dict[str, ResourceClaim] = {}  # claims as the API server holds them
        self._reset()

    def _reset(self) -> None:
        self.nodes: list[Node] = []
        self.queues: list[Queue] = []
        self.groups: list[PodGroup] = []
        self.groups_removed: list[str] = []
        self._pods: dict[str, Pod | None] = {}
        self.claims: dict[str, ResourceClaim | None] = {}  # DRA claims made, allocated or gone
        self.dra = DraObjects()  # slices and classes, sent once

    def upsert(self, pod: Pod) -> None:
        self._pods[pod.key] = pod

    def remove(self, key: str) -> None:
        self._pods[key] = None

    def __bool__(self) -> bool:
        return bool(self.nodes or self.queues or self.groups or self.groups_removed or self._pods or self.claims)

    def take(self) -> ClusterDeltas:
        deltas = ClusterDeltas(
            nodes_upserted=tuple(self.nodes),
            queues_upserted=tuple(self.queues),
            pod_groups_upserted=tuple(self.groups),
            pod_groups_removed=tuple(self.groups_removed),
            pods_upserted=tuple(p for p in self._pods.values() if p is not None),
            pods_removed=tuple(k for k, p in self._pods.items() if p is None),
            dra=DraChanges(
                slices_upserted=self.dra.slices,
                classes_upserted=self.dra.classes,
                claims_upserted=tuple(c for c in self.claims.values() if c is not None),
                claims_removed=tuple(k for k, c in self.claims.items() if c is None),
            ),
        )
        for key, claim in self.claims.items():
            if claim is None:
                self.known_claims.pop(key, None)
            else:
                self.known_claims[key] = claim
        self._reset()
        return deltas


def _pod_key(spec: JobSpec, index: int) -> str:
    return f"{NAMESPACE}/{spec.name}-{index}"


def _pod_index(key: str) -> int:
    return int(key.rsplit("-", 1)[1])
