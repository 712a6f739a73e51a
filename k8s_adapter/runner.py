"""The scheduler loop against a real API server: watch, schedule, bind, evict, explain.

Every step of an iteration has its own error boundary: a failure is logged, counted in
``kai_ray_loop_errors_total{step}`` and the loop goes on (the next iteration retries). The
cycle itself runs in a worker thread so health checks and watches stay responsive.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram

from coordinator.coordinator import CycleResult
from k8s_adapter.api import KubeApi
from k8s_adapter.binder import Binder, BindRequest
from k8s_adapter.cache import ClusterCache
from k8s_adapter.evictor import Evictor, EvictRequest
from k8s_adapter.grouper import PodGrouper
from k8s_adapter.kinds import WATCHED
from k8s_adapter.leader import Leadership
from k8s_adapter.reflector import Reflector
from k8s_adapter.status import StatusWriter
from kai_ray.deltas import ClusterDeltas
from kai_ray.metrics import SECONDS_BUCKETS, SchedulerMetrics

log = logging.getLogger(__name__)


class CoordinatorLike(Protocol):
    def apply(self, deltas: ClusterDeltas) -> None: ...

    def cycle(self, now: float) -> CycleResult: ...

    def bind_failed(self, pods: list[str]) -> None: ...


@dataclass(slots=True)
class LoopState:
    iterations: int = 0
    last_iteration: float = field(default_factory=time.monotonic)
    synced: bool = False
    cycle_ok: bool = True  # the last scheduling cycle finished (False while cycles fail: /healthz)
    cycle_failed_at: float = -float("inf")  # monotonic time of the last failed cycle
    binds: int = 0
    evictions: int = 0


class SchedulerLoop:
    def __init__(
        self,
        api: KubeApi,
        cache: ClusterCache,
        coordinator_factory: Callable[[int], CoordinatorLike],
        registry: CollectorRegistry,
        leadership: Leadership,
        period: float = 1.0,
        eviction_mode: str = "eviction",
        sync_timeout: float = 30.0,
    ) -> None:
        self.api = api
        self.cache = cache
        self.coordinator_factory = coordinator_factory
        self.coordinator: CoordinatorLike | None = None
        self.metrics = SchedulerMetrics(registry)
        self.errors = Counter(
            "kai_ray_loop_errors", "Scheduler loop steps that failed, by step.", ["step"], registry=registry
        )
        self.step_seconds = Histogram(
            "kai_ray_loop_step_duration_seconds",
            "Time per scheduler loop step.",
            ["step"],
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        self.leadership = leadership
        self.period = period
        self.sync_timeout = sync_timeout
        self.binder = Binder(api)
        self.evictor = Evictor(api, mode=eviction_mode)
        self.status = StatusWriter(api)
        self.grouper = PodGrouper(api)
        self.reflectors = [Reflector(api, kind, cache.on_list, cache.on_event) for kind in WATCHED]
        self.state = LoopState()
        self._stop = asyncio.Event()
        self._coordinator_lock = asyncio.Lock()
        self._in_flight: set[asyncio.Task[None]] = set()
        self._explaining: asyncio.Task[None] | None = None

    def stop(self) -> None:
        self._stop.set()
        for reflector in self.reflectors:
            reflector.stop()

    async def run(self) -> None:
        watches = [asyncio.create_task(r.run(), name=f"watch-{r.kind.plural}") for r in self.reflectors]
        try:
            await self._wait_for_sync()
            self.coordinator = self.coordinator_factory(len(self.cache.nodes))
            while not self._stop.is_set():
                started = time.monotonic()
                await self.iterate()
                self.state.last_iteration = time.monotonic()
                elapsed = time.monotonic() - started
                if elapsed > 10 * self.period:
                    log.warning("a scheduler iteration took %.1fs", elapsed)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), max(0.0, self.period - elapsed))
        finally:
            if self._in_flight:  # let binds in flight finish: their pods are already counted as placed
                await asyncio.wait(set(self._in_flight), timeout=30)
            for task in watches:
                task.cancel()
            await asyncio.gather(*watches, return_exceptions=True)

    async def _wait_for_sync(self) -> None:
        try:
            await asyncio.wait_for(asyncio.gather(*(r.stats.synced.wait() for r in self.reflectors)), self.sync_timeout)
        except TimeoutError:
            missing = [r.kind.plural for r in self.reflectors if not r.stats.synced.is_set()]
            log.error(
                "not all watches synced within %ss (missing: %s); scheduling with what is known",
                self.sync_timeout,
                ", ".join(missing),
            )
        self.state.synced = True

    async def iterate(self) -> None:
        """One turn: feed changes, group pods, and (as leader) schedule, bind, evict, explain."""
        self.state.iterations += 1
        coordinator = self.coordinator
        assert coordinator is not None
        await self._step("apply", lambda: self._locked(coordinator.apply, self.cache.take_deltas()))
        await self._step("group", lambda: self.grouper.group(self.cache.ungrouped()))
        if not self.leadership.is_leader():
            return
        result: list[CycleResult] = []

        async def cycle() -> None:
            result.append(await self._locked(coordinator.cycle, time.time()))

        await self._step("cycle", cycle)
        self.state.cycle_ok = bool(result)
        if not result:
            self.state.cycle_failed_at = time.monotonic()
        if not result:
            return
        outcome = result[0]
        # Binds and explanations go on in the background while the next cycle is computed:
        # the coordinator already counts the binds as placed, and only the latest
        # explanation matters. Their failures come back through bind_failed.
        self._background(self._step("bind", lambda: self._bind(coordinator, outcome)))
        await self._step("evict", lambda: self._evict(outcome))
        if self._explaining is None or self._explaining.done():
            self._explaining = self._background(self._step("status", lambda: self._explain(outcome)))
        await self._step("metrics", lambda: _sync(lambda: self.metrics.observe_cycle(outcome)))

    async def _locked(self, method: Callable[..., Any], *args: Any) -> Any:
        """Coordinator calls one at a time, off the event loop (a cycle takes CPU)."""
        async with self._coordinator_lock:
            return await asyncio.to_thread(method, *args)

    def _background(self, work: Awaitable[None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(work)
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)
        return task

    async def _step(self, name: str, action: Callable[[], Awaitable[Any]]) -> None:
        started = time.perf_counter()
        try:
            await action()
        except asyncio.CancelledError:
            raise
        except Exception:  # one failing step must not stop scheduling; it is logged and counted
            self.errors.labels(name).inc()
            log.exception("scheduler loop step %s failed", name)
        finally:
            self.step_seconds.labels(name).observe(time.perf_counter() - started)

    async def _bind(self, coordinator: CoordinatorLike, outcome: CycleResult) -> None:
        if not outcome.binds:
            return
        if not self.leadership.is_leader():  # fencing: the lease may have moved during the cycle
            await self._locked(coordinator.bind_failed, [b.pod for b in outcome.binds])
            return
        requests = [
            BindRequest(b.pod, self.cache.pods[b.pod].uid if b.pod in self.cache.pods else "", b.node, b.gpu_groups)
            for b in outcome.binds
        ]
        results = await self.binder.bind_all(requests)
        failed = [r.pod for r in results if not r.ok]
        if failed:
            await self._locked(coordinator.bind_failed, failed)
        self.state.binds += len(results) - len(failed)
        self.metrics.observe_binds(len(results) - len(failed), len(failed))

    async def _evict(self, outcome: CycleResult) -> None:
        requests = [EvictRequest(e.pod, e.action, e.preemptor) for e in outcome.evictions]
        if requests or self.evictor.waiting:
            report = await self.evictor.evict_all(requests)
            self.state.evictions += len(report.evicted)

    async def _explain(self, outcome: CycleResult) -> None:
        groups = {key: (d.status, d.reason) for key, d in outcome.decisions.pod_groups.items()}
        await self.status.publish(groups)


async def _sync(action: Callable[[], None]) -> None:
    action()
