"""Simulated time around the real scheduler: jobs arrive, pods run, finish and are evicted.

The simulator plays the parts of the API server, the kubelets and the job controllers; the
scheduler it drives is the real coordinator with real shards (in-process or Ray actors), fed
through the adapter's own ``ClusterCache`` exactly as ``kai-ray run`` feeds it: every change
is a Kubernetes manifest written to the simulator's API server (``apiserver.py``), a watch
event into the cache, and the cache's deltas into the coordinator. Nothing inside the
scheduler is faked.

- A job arrives: its PodGroup and pending pods are created.
- A cycle binds pods: they run at once (the watch confirms the bind). Once a job has
  ``minMember`` pods running its clock starts; it finishes ``duration`` later: its pods turn
  Succeeded (their pending ones are deleted) and stay until ``completed_ttl`` later, as a
  finished Job's pods do, then go with their PodGroup.
- A cycle evicts pods: they turn Releasing and disappear after the eviction grace delay;
  the job's controller re-creates them as pending pods. A job that loses its gang stops
  its clock and starts over (with its whole duration) when it is running again.
- DRA (``simulate --dra-share``): ResourceSlices and the DeviceClass are written at the start;
  a DRA job's pod gets its own ResourceClaim, a bind writes the claim's allocation (the
  binder's part) and a pod that finishes or goes deletes it (the claim controller's), each
  through the cache as ``kai-ray run --dra`` sees them.
- Time-based fair share: queue usage is accounted in simulated time (``usage.py``) and handed
  to the coordinator with each cycle's deltas, as the adapter's usage feed does.

After every cycle the usage of every node is recounted from the pods that hold it and
compared with what the scheduler's shards hold (``accounting.py``); any difference (a
finished pod still holding GPUs, a pod counted twice) is reported and fails the run.

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

from coordinator.coordinator import Coordinator, CycleResult
from k8s_adapter.cache import ClusterCache
from k8s_adapter.kinds import DEVICE_CLASSES, NODES, POD_GROUPS, PODS, QUEUES, RESOURCE_CLAIMS, RESOURCE_SLICES
from k8s_adapter.kinds import PRIORITY_CLASSES as PRIORITY_CLASS_KIND
from kai_ray import labels as L
from kai_ray.app.sim import accounting
from kai_ray.app.sim.apiserver import (
    SimApiServer,
    node_manifest,
    pod_group_manifest,
    pod_manifest,
    priority_class_manifest,
    queue_manifest,
)
from kai_ray.app.sim.dra import DeviceLedger, claim_for, claim_manifest, claimed, class_manifest, slice_manifest
from kai_ray.app.sim.report import SimMetrics
from kai_ray.app.sim.usage import SimUsage
from kai_ray.app.sim.workload import NAMESPACE, PRIORITY_CLASSES, JobSpec, Workload
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import DraObjects, Node, Pod, PodState, ResourceClaim
from placement.rows import NodeHolds

KINDS = {
    kind.name: kind
    for kind in (NODES, PODS, QUEUES, POD_GROUPS, PRIORITY_CLASS_KIND, RESOURCE_SLICES, DEVICE_CLASSES, RESOURCE_CLAIMS)
}


class Scheduler(Protocol):
    """What the simulator needs of a coordinator (in-process or a Ray actor proxy)."""

    def step(self, deltas: ClusterDeltas, now: float, actions: Sequence[str] | None = None) -> CycleResult:
        """Apply the changes, then run one scheduling cycle."""
        ...

    def node_holds(self) -> list[NodeHolds]:
        """What every node holds as the shards have it (for the accounting check)."""
        ...


class InProcess:
    """A coordinator in this process, as the simulator drives it."""

    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator

    def step(self, deltas: ClusterDeltas, now: float, actions: Sequence[str] | None = None) -> CycleResult:
        return self.coordinator.step(deltas, now, actions)

    def node_holds(self) -> list[NodeHolds]:
        return self.coordinator.shards.every_hold()


@dataclass(frozen=True, slots=True)
class SimSettings:
    period: float = 10.0  # simulated seconds between cycles while something can change
    horizon: float = 6 * 3600.0  # simulated seconds to run
    eviction_grace: float = 30.0  # an evicted pod holds its resources this long
    recheck: float = 60.0  # with pending pods but no changes, cycle again after this long (time-based rules)
    completed_ttl: float = 600.0  # a finished job's Succeeded pods stay this long (they hold nothing)


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
        mig_label_key: str = L.MIG_ENABLED_NODE_LABEL,
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
        self.cache = ClusterCache(mig_label_key=mig_label_key)  # reads nodes as the config says
        self.api = SimApiServer(lambda kind, event, obj: self.cache.on_event(KINDS[kind], event, obj))
        self.now = 0.0
        self.last_result: CycleResult | None = None
        self.dra = dra or DraObjects()
        self.devices = DeviceLedger()  # which claim holds which DRA device, by the simulator's count
        self.claims: dict[str, ResourceClaim] = {}  # DRA claims as the simulator's API server holds them
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
            elif kind == "cleanup":
                self._cleanup(subject)

    def _write(self, pod: Pod) -> None:
        self.pods[pod.key] = pod
        self.api.put(PODS.name, pod.key, pod_manifest(pod, self.now))

    def _delete(self, key: str) -> None:
        self.pods.pop(key, None)
        self.api.delete(PODS.name, key)

    def _arrive(self, name: str) -> None:
        spec = self._specs[name]
        run = self.jobs[name] = JobRun(spec)
        self.metrics.job_arrived(spec)
        group = spec.pod_group()
        self.api.put(POD_GROUPS.name, group.key, pod_group_manifest(group))
        for index in range(spec.pods):
            self._write(self._with_claim(spec, spec.pod(index)))
            run.incarnations[index] = 0

    def _with_claim(self, spec: JobSpec, pod: Pod) -> Pod:
        """A DRA job's pod with its own claim (made as the claim controller makes one)."""
        if not spec.dra:
            return pod
        self._write_claim(claim_for(pod, int(spec.gpus)))
        return claimed(pod)

    def _write_claim(self, claim: ResourceClaim) -> None:
        self.claims[claim.key] = claim
        self.api.put(RESOURCE_CLAIMS.name, claim.key, claim_manifest(claim))

    def _drop_claim(self, pod: Pod) -> None:
        for pod_claim in pod.resource_claims:
            key = f"{pod.namespace}/{pod_claim.claim}"
            self.metrics.gpus_in_use -= self.devices.release(key)
            if self.claims.pop(key, None) is not None:
                self.api.delete(RESOURCE_CLAIMS.name, key)

    def _finish(self, name: str, epoch: int, now: float) -> None:
        """The job is done: its running pods succeed (and keep their node name, holding nothing),
        its controller deletes the ones still waiting."""
        run = self.jobs[name]
        if run.epoch != epoch or run.finished_at is not None:
            return  # the job lost its gang after this was scheduled
        run.finished_at = now
        for index in range(run.spec.pods):
            key = _pod_key(run.spec, index)
            pod = self.pods.get(key)
            if pod is None:
                continue
            self.metrics.pod_left(pod)
            self._drop_claim(pod)  # the claim controller frees what a finished pod held
            if pod.state is PodState.RUNNING:
                self._write(replace(pod, state=PodState.SUCCEEDED))
            else:
                self._delete(key)
        run.running.clear()
        self.metrics.job_finished(run.spec, now)
        self._at(now + self.settings.completed_ttl, "cleanup", name)

    def _cleanup(self, name: str) -> None:
        run = self.jobs[name]
        for index in range(run.spec.pods):
            self._delete(_pod_key(run.spec, index))
        self.api.delete(POD_GROUPS.name, f"{NAMESPACE}/{name}")

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
        self._drop_claim(pod)
        self._delete(key)
        self._write(self._with_claim(run.spec, run.spec.pod(index, incarnation)))

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
                claim = self.claims.get(grant.claim)
                if claim is not None:
                    self._write_claim(replace(claim, allocation=grant.allocation, reserved_for=(pod.name,)))
            self._write(bound)
            self.metrics.pod_bound(bound, now)
            run = self.jobs[pod.pod_group or ""]
            run.running.add(_pod_index(bind.pod))
            touched.add(run.spec.name)
        for eviction in result.evictions:
            pod = self.pods.get(eviction.pod)
            if pod is None or pod.state is not PodState.RUNNING:
                continue
            self._write(replace(pod, state=PodState.RELEASING))
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
        for name, value in PRIORITY_CLASSES.items():
            self.api.put(PRIORITY_CLASS_KIND.name, name, priority_class_manifest(name, value))
        for node in self.nodes.values():
            self.api.put(NODES.name, node.name, node_manifest(node))
        for queue in self.workload.queues:
            self.api.put(QUEUES.name, queue.name, queue_manifest(queue))
        for device_class in self.dra.classes:
            self.api.put(DEVICE_CLASSES.name, device_class.name, class_manifest(device_class))
        for resource_slice in self.dra.slices:
            self.api.put(RESOURCE_SLICES.name, resource_slice.name, slice_manifest(resource_slice))
        now, last_cycle, changed = 0.0, -math.inf, True
        started = time.perf_counter()
        while now <= settings.horizon:
            self.now = now
            self.metrics.account(now)  # the time up to now, at the levels that held over it
            self._due(now)
            pending = any(p.state is PodState.PENDING for p in self.pods.values())
            refresh = self.usage is not None and pending and self.usage.due(now)  # fair shares move with time
            if self.api.writes or changed or refresh or (pending and now - last_cycle >= settings.recheck):
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

    def _cycle(self, now: float) -> bool:
        self.api.take_writes()
        deltas = self.cache.take_deltas()
        usage = self.usage.for_cycle(now) if self.usage is not None else None
        if usage is not None:
            deltas = replace(deltas, queue_usage=usage)
        wall = time.perf_counter()
        result = self.scheduler.step(deltas, now)
        wall = time.perf_counter() - wall
        self.last_result = result
        if self.usage is not None:
            self.usage.after(now, result)
        self._take(result, now)
        self.metrics.cycle(now, wall, result)  # after the binds and evictions: the state from now on
        self._check_accounting(now)
        return bool(result.binds or result.evictions)

    def _check_accounting(self, now: float) -> None:
        """The shards' holds against a recount from the pods (binds of this cycle included)."""
        held = accounting.from_holds(self.scheduler.node_holds())
        problems = accounting.differences(held, accounting.from_pods(self.pods.values(), self.nodes))
        self.metrics.accounting_errors.extend(f"t={now:.0f}s {problem}" for problem in problems)

    def _next_time(self, now: float, changed: bool, pending: bool, last_cycle: float) -> float:
        """The next cycle time on the period grid: the next step if something may still move,
        else the next event (or recheck) time, so idle stretches cost nothing."""
        step = self.settings.period
        if changed or self.api.writes:
            return now + step
        upcoming = [self._events[0][0]] if self._events else []
        if pending:
            upcoming.append(last_cycle + self.settings.recheck)
            if self.usage is not None:
                upcoming.append(self.usage.next_time())
        if not upcoming:
            return self.settings.horizon + step
        return max(now + step, math.ceil(min(upcoming) / step) * step)


def _pod_key(spec: JobSpec, index: int) -> str:
    return f"{NAMESPACE}/{spec.name}-{index}"


def _pod_index(key: str) -> int:
    return int(key.rsplit("-", 1)[1])
