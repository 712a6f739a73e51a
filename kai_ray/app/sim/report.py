"""What a simulation measured, kept independently of the scheduler's own bookkeeping.

Node usage is recomputed here from the pods the simulator bound and released, so the
over-commit and GPU-seconds checks are checks *of* the scheduler, not echoes of it.
Figures:

- decision throughput: pods bound per wall second spent in the scheduler (apply + cycle);
- session latency: wall time of each cycle, p50/p99;
- queue wait: simulated seconds from a job's arrival until its gang first ran, per leaf queue;
- GPU utilization: GPUs held by running pods over GPUs present, sampled and time-averaged;
- fair-share error: per leaf queue, the time-averaged |allocated - fair share| in GPUs; the
  total is their sum over the cluster's GPUs (0 = every queue held exactly its fair share);
- below fair share: per leaf queue, the time it spent short of its fair share by at least one
  of its waiting jobs, its longest stretch, and the pending reasons that held it there
  (``shortfall.py``);
- evictions by action, gang restarts, partial gangs (must be 0), over-committed node
  checks (must be 0), and where every pod ended.

Time-averaged figures charge each stretch of simulated time to the state that held over it:
the engine calls ``account`` before a step's arrivals, finishes and cycle change anything,
and ``cycle`` once the cycle's binds and evictions are applied.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from k8s_adapter.metrics import SchedulerMetrics, exposition, new_registry
from kai_ray.app.process_memory import rss_bytes
from kai_ray.app.sim.shortfall import ShortfallTracker
from kai_ray.model import Node, Pod, PodState

if TYPE_CHECKING:
    from coordinator.coordinator import CycleResult
    from kai_ray.app.sim.usage import SimUsage
    from kai_ray.app.sim.workload import JobSpec, Workload

TOLERANCE = 1e-6
LARGE_GANG_PODS = 128  # a job of at least this many pods gets its own wait in the report


@dataclass(slots=True)
class NodeUse:
    whole_gpus: float = 0.0
    shared: dict[str, float] = field(default_factory=dict)  # GPU group -> portions taken
    cpu: float = 0.0
    memory: float = 0.0
    pods: int = 0


class SimMetrics:
    def __init__(self, nodes: Sequence[Node], workload: Workload) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.gpu_capacity = float(sum(n.allocatable.gpu for n in nodes))
        self.jobs = len(workload.jobs)
        self.pods_total = workload.pods
        self.leaves = workload.leaf_queues
        self.use: dict[str, NodeUse] = defaultdict(NodeUse)
        self.gpus_in_use = 0.0
        self.cycle_walls: list[float] = []
        self.scheduler_seconds = 0.0
        self.bound = 0
        self.evictions: Counter[str] = Counter()
        self.restarts = 0
        self.partial_gangs = 0
        self.overcommits: list[str] = []
        self.accounting_errors: list[str] = []  # the scheduler's node usage against a recount from the pods
        self.waits: dict[str, list[float]] = defaultdict(list)
        # Seconds from arrival to start of each large gang (None: never started), by job name.
        self.large_gang_waits: dict[str, float | None] = {
            job.name: None for job in workload.jobs if job.pods >= LARGE_GANG_PODS
        }
        self.started_jobs = 0
        self.completed_jobs = 0
        self.timeline: list[tuple[float, float]] = []  # (sim time, GPU utilization)
        self.queue_timeline: dict[str, list[tuple[float, float, float]]] = defaultdict(list)  # t, alloc, fair
        self._last_time = 0.0
        self._queue_now: dict[str, tuple[float, float]] = {}
        self._error_gpu_seconds: dict[str, float] = defaultdict(float)
        self.gpu_seconds_used = 0.0
        self.gpu_seconds_capacity = 0.0
        self.registry = new_registry()
        self.prometheus = SchedulerMetrics(self.registry)
        self.end_states: Counter[str] = Counter()
        self.completed_pods = 0
        self.arrived_pods = 0
        self.waiting_jobs: list[tuple[str, int, str]] = []  # (job, pods pending, why), most pods first
        self.pending_reasons: Counter[str] = Counter()
        self.simulated_seconds = 0.0
        self.wall_seconds = 0.0
        self.rss_bytes = 0
        self.usage: SimUsage | None = None  # set when time-based fair share is on
        self.shortfall = ShortfallTracker(self.leaves, {job.name: job for job in workload.jobs}, workload.queues)

    # ------------------------------------------------------------------ cycles
    def cycle(self, now: float, wall: float, result: CycleResult) -> None:
        """A cycle's outcome, once its binds and evictions are applied (the pods' holds are counted)."""
        self.account(now)
        self.cycle_walls.append(wall)
        self.scheduler_seconds += wall
        self.prometheus.observe_cycle(result)
        for name in self.leaves:
            figures = result.decisions.queues.get(name)
            if figures is not None:
                self._queue_now[name] = (float(figures["allocated"]["gpu"]), float(figures["fairShare"]["gpu"]))
        self.shortfall.cycle(now, result, self._free_gpus)

    def _free_gpus(self) -> list[float]:
        """Every node's idle GPUs (a shared GPU with any fraction on it counts as used)."""
        free = []
        for name, node in self.nodes.items():
            use = self.use.get(name)
            used = use.whole_gpus + len(use.shared) if use is not None else 0.0
            free.append(max(0.0, node.allocatable.gpu - used))
        return free

    # ------------------------------------------------------------------ pods
    def pod_bound(self, pod: Pod, now: float) -> None:
        self.bound += 1
        self.prometheus.observe_binds(1, 0, [max(0.0, now - pod.created)])
        self._hold(pod, +1)
        problem = self._overcommitted(pod.node or "")
        if problem:
            self.overcommits.append(f"t={now:.0f}s {pod.node}: {problem}")

    def pod_left(self, pod: Pod) -> None:
        if pod.state in (PodState.RUNNING, PodState.RELEASING) and pod.node:
            self._hold(pod, -1)

    def pod_evicted(self, action: str) -> None:
        self.evictions[action] += 1
        self.prometheus.observe_eviction(action)

    def _hold(self, pod: Pod, sign: int) -> None:
        use = self.use[pod.node or ""]
        use.cpu += sign * pod.requests.cpu
        use.memory += sign * pod.requests.memory
        use.pods += sign
        use.whole_gpus += sign * pod.requests.gpu
        gpus = pod.requests.gpu
        if pod.gpu_share is not None and pod.gpu_share.fraction is not None:
            for group in pod.gpu_groups:
                left = use.shared.get(group, 0.0) + sign * pod.gpu_share.fraction
                if left > TOLERANCE:
                    use.shared[group] = left
                else:
                    use.shared.pop(group, None)
            gpus += pod.gpu_share.fraction * max(len(pod.gpu_groups), 1)
        self.gpus_in_use += sign * gpus

    def _overcommitted(self, name: str) -> str:
        node, use = self.nodes.get(name), self.use[name]
        if node is None:
            return "not a node of the cluster"
        alloc = node.allocatable
        if use.whole_gpus + len(use.shared) > alloc.gpu + TOLERANCE:
            return f"{use.whole_gpus:g} whole + {len(use.shared)} shared GPUs on {alloc.gpu:g}"
        full = [g for g, portion in use.shared.items() if portion > 1 + TOLERANCE]
        if full:
            return f"shared GPU {full[0]} holds {use.shared[full[0]]:g} of one device"
        for label, used, have in (
            ("cpu", use.cpu, alloc.cpu),
            ("memory", use.memory, alloc.memory),
            ("pods", use.pods, alloc.pods),
        ):
            if used > have + TOLERANCE:
                return f"{label} {used:g} of {have:g}"
        return ""

    # ------------------------------------------------------------------ jobs
    def job_arrived(self, spec: JobSpec) -> None:
        self.arrived_pods += spec.pods

    def job_started(self, spec: JobSpec, now: float) -> None:
        self.started_jobs += 1
        self.waits[spec.queue].append(now - spec.arrival)
        if spec.name in self.large_gang_waits and self.large_gang_waits[spec.name] is None:
            self.large_gang_waits[spec.name] = now - spec.arrival

    def job_finished(self, spec: JobSpec, now: float) -> None:
        self.completed_jobs += 1
        self.completed_pods += spec.pods

    # ------------------------------------------------------------------ time
    def account(self, now: float) -> None:
        """Charge the time since the last call to the levels that held over it."""
        span = now - self._last_time
        if span > 0:
            self.gpu_seconds_used += self.gpus_in_use * span
            self.gpu_seconds_capacity += self.gpu_capacity * span
            for name, (allocated, fair) in self._queue_now.items():
                self._error_gpu_seconds[name] += abs(allocated - fair) * span
            self._last_time = now
        self.shortfall.sample(now)

    def sample(self, now: float) -> None:
        """The time since the last call (see ``account``), and a point of the timelines at now."""
        self.account(now)
        utilization = self.gpus_in_use / self.gpu_capacity if self.gpu_capacity else 0.0
        self.timeline.append((now, utilization))
        for name, (allocated, fair) in self._queue_now.items():
            self.queue_timeline[name].append((now, allocated, fair))

    def finish(self, now: float, pods: Iterable[Pod], last: CycleResult | None, wall: float) -> None:
        self.sample(now)
        self.shortfall.finish(now)
        self.simulated_seconds = now
        self.wall_seconds = wall
        decisions = last.decisions.pods if last is not None else {}
        waiting: dict[str, tuple[int, str]] = {}
        for pod in pods:
            if pod.state is PodState.SUCCEEDED:
                continue  # a finished job's pods are counted as Completed below
            self.end_states[pod.state.value] += 1
            if pod.state is PodState.PENDING:
                decision = decisions.get(pod.key)
                if decision is None:
                    reason = "arrived after the last cycle"
                elif decision.status == "Pipelined":
                    reason = "pipelined: waits for releasing pods"
                else:
                    reason = decision.reason or "(no reason given)"
                self.pending_reasons[reason] += 1
                count, _ = waiting.get(pod.pod_group or pod.key, (0, reason))
                waiting[pod.pod_group or pod.key] = (count + 1, reason)
        self.waiting_jobs = sorted(((job, n, r) for job, (n, r) in waiting.items()), key=lambda w: (-w[1], w[0]))
        self.end_states["Completed"] = self.completed_pods
        self.end_states["NotArrived"] = self.pods_total - self.arrived_pods
        self.rss_bytes = rss_bytes()

    # ------------------------------------------------------------------ figures
    @property
    def pods_per_second(self) -> float:
        return self.bound / self.scheduler_seconds if self.scheduler_seconds > 0 else 0.0

    def latency(self, q: float) -> float:
        return float(np.percentile(self.cycle_walls, q)) if self.cycle_walls else 0.0

    @property
    def gpu_utilization(self) -> float:
        return self.gpu_seconds_used / self.gpu_seconds_capacity if self.gpu_seconds_capacity else 0.0

    def queue_error(self, name: str) -> float:
        return self._error_gpu_seconds[name] / self.simulated_seconds if self.simulated_seconds else 0.0

    @property
    def fair_share_error(self) -> float:
        if not self.gpu_capacity:
            return 0.0
        return sum(self.queue_error(name) for name in self.leaves) / self.gpu_capacity

    def to_json(self, nodes: int, shards: int) -> dict[str, Any]:
        waits = {}
        for name in self.leaves:
            values = self.waits.get(name, [])
            waits[name] = {
                "started": len(values),
                "p50Seconds": float(np.percentile(values, 50)) if values else None,
                "p90Seconds": float(np.percentile(values, 90)) if values else None,
                "maxSeconds": max(values) if values else None,
                "fairShareErrorGpus": self.queue_error(name),
            }
        return {
            "nodes": nodes,
            "shards": shards,
            "pods": self.pods_total,
            "jobs": self.jobs,
            "podsBound": self.bound,
            "podsPerSecond": self.pods_per_second,
            "sessionLatencyP50Seconds": self.latency(50),
            "sessionLatencyP99Seconds": self.latency(99),
            "cycles": len(self.cycle_walls),
            "partialGangs": self.partial_gangs,
            "overcommittedNodes": len(self.overcommits),
            "accountingErrors": len(self.accounting_errors),
            "gpuUtilization": self.gpu_utilization,
            "gpuSecondsUsed": self.gpu_seconds_used,
            "gpuSecondsCapacity": self.gpu_seconds_capacity,
            "fairShareError": self.fair_share_error,
            "rssBytes": self.rss_bytes,
            "simulatedSeconds": self.simulated_seconds,
            "wallSeconds": self.wall_seconds,
            "schedulerSeconds": self.scheduler_seconds,
            "jobsStarted": self.started_jobs,
            "jobsCompleted": self.completed_jobs,
            "gangRestarts": self.restarts,
            "evictions": dict(self.evictions),
            "podsByEndState": dict(self.end_states),
            "pendingReasons": dict(self.pending_reasons.most_common(10)),
            "waitingJobs": [{"job": j, "pendingPods": n, "reason": r} for j, n, r in self.waiting_jobs[:10]],
            "queueWait": waits,
            "largeGangWaits": self.large_gang_waits,
            "belowFairShare": {name: self.shortfall.queues[name].to_json() for name in self.leaves},
            "queueHistory": self.queue_history(),
            "metrics": exposition(self.registry).decode(),
        }

    # ------------------------------------------------------------------ queues over time
    def gpu_hours(self, name: str) -> float:
        """GPU-hours a leaf queue held over the run (from the sampled allocations)."""
        samples = self.queue_timeline.get(name, [])
        total = sum(a * (t1 - t0) for (t0, a, _), (t1, _, _) in zip(samples, samples[1:], strict=False))
        return total / 3600

    def queue_history(self) -> dict[str, Any]:
        """Per leaf queue: GPUs allocated and fair share over time (only where they change), its
        GPU-hours, and with time-based fair share its usage over time."""
        out: dict[str, Any] = {}
        total = sum(self.gpu_hours(name) for name in self.leaves) or 1.0
        for name in self.leaves:
            samples = self.queue_timeline.get(name, [])
            changes = [s for i, s in enumerate(samples) if i == 0 or s[1:] != samples[i - 1][1:]]
            entry: dict[str, Any] = {
                "gpuHours": self.gpu_hours(name),
                "shareOfGpuHours": self.gpu_hours(name) / total,
                "allocatedAndFairShare": [[t, a, f] for t, a, f in changes],
            }
            if self.usage is not None:
                entry["usage"] = [[t, u] for t, u in self.usage.timeline.get(name, [])]
            out[name] = entry
        return out
