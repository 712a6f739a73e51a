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
from typing import Any, Protocol, runtime_checkable

from prometheus_client import CollectorRegistry

from coordinator.results import BindIntent, CycleResult
from k8s_adapter.api import KubeApi
from k8s_adapter.bind_sender import BindSender
from k8s_adapter.binder import BindBackoff, Binder
from k8s_adapter.cache import ClusterCache
from k8s_adapter.coordinator_health import CoordinatorHealth
from k8s_adapter.decision_log import DecisionLog
from k8s_adapter.evict_sender import EvictSender
from k8s_adapter.evictor import Evictor
from k8s_adapter.explain import cache_notes
from k8s_adapter.gpu_sharing import ReservationService, ReservationSettings, gpu_groups_of
from k8s_adapter.job_clocks import JobClockWriter
from k8s_adapter.kinds import PODS, Kind
from k8s_adapter.leader import Leadership
from k8s_adapter.loop_metrics import LoopMetrics
from k8s_adapter.loop_steps import LoopSteps
from k8s_adapter.metrics import SchedulerMetrics
from k8s_adapter.problems import problem_events
from k8s_adapter.reflector import Reflector
from k8s_adapter.startup import StartupClock
from k8s_adapter.status import StatusWriter
from k8s_adapter.ungate_sender import UngateSender
from k8s_adapter.usage_feeds import UsageFeed
from k8s_adapter.wakeup import Wakeup
from k8s_adapter.watches import Watches
from kai_ray.deltas import ClusterDeltas
from kai_ray.heap import HeapTrimmer
from pod_grouper.live import DEFER_SECONDS, PodGrouper

log = logging.getLogger(__name__)
PAGE_POLL_SECONDS = 0.05  # while the pods are listed: how often their pages so far are decoded
# On a stop, how long binds and writes already sent may take before they are dropped: well inside
# the 30 s Kubernetes gives a pod between SIGTERM and SIGKILL, so the process ends on its own.
SHUTDOWN_GRACE_SECONDS = 20.0
RESERVATION_SWEEP_SECONDS = 60.0  # a full reservation-pod clean-up, besides the one per finished sharer
LOOP_STEPS = (
    "apply",
    "group",
    "usage",
    "cycle",
    "bind",
    "ungate",
    "evict",
    "clocks",
    "status",
    "metrics",
    "reservations",
)


class CoordinatorLike(Protocol):
    def apply(self, deltas: ClusterDeltas) -> None: ...

    def cycle(self, now: float) -> CycleResult: ...

    def bind_failed(self, pods: list[str]) -> None: ...


@runtime_checkable
class StreamsBinds(Protocol):
    """A coordinator that hands out a cycle's binds as it commits them (one in this process)."""

    bind_sink: Callable[[list[BindIntent]], None] | None


@dataclass(slots=True)
class LoopState:
    iterations: int = 0
    last_iteration: float = field(default_factory=time.monotonic)
    synced: bool = False
    cycle_ok: bool = True  # the last scheduling cycle finished (False while cycles fail: /healthz)
    cycle_failed_at: float = -float("inf")  # monotonic time of the last failed cycle
    binds: int = 0
    evictions: int = 0
    cycles: int = 0  # cycles run as the leader
    gave_up: bool = False  # stopped because no coordinator could be started (see CoordinatorHealth)
    work_left: bool = False  # the last cycle stopped at its time budget with victim searches to go on with


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
        reservations: ReservationSettings | None = None,
        dra: bool = False,
        usage: UsageFeed | None = None,
        pod_grouper: bool = True,
        mark_disruption_target: bool = True,
        bind_backoff: BindBackoff | None = None,
        watches: Watches | None = None,
    ) -> None:
        self.api = api
        self.cache = cache
        self.coordinator_factory = coordinator_factory
        self.coordinator: CoordinatorLike | None = None
        self.metrics = SchedulerMetrics(registry)
        self.loop_metrics = LoopMetrics(registry, LOOP_STEPS)
        self.leadership = leadership
        self.period = period
        self.sync_timeout = sync_timeout
        self.reservations = ReservationService(api, reservations)
        self.binder = Binder(api, reservations=self.reservations)
        self.startup = StartupClock()
        self.binder.mark = self.startup.mark
        cache.listeners.append(self._watch_sharers)
        self._next_reservation_sweep = 0.0
        self.evictor = Evictor(api, mode=eviction_mode, mark=mark_disruption_target)
        self.status = StatusWriter(api, component=cache.scheduler_name)
        cache.listeners.append(self.status.on_watch_event)
        self.evictions = EvictSender(self.evictor, self.status, cache, self.metrics)
        self.bind_backoff = bind_backoff or BindBackoff()
        self.clocks = JobClockWriter(api)
        self.usage = usage  # time-based fair share (None: no usage, KAI's default)
        self.pod_grouper = pod_grouper  # off: no PodGroup creates or pod patches (the chart may not grant them)
        self.binds = BindSender(self.binder, self.status, self.bind_backoff, cache, self.metrics, pod_grouper)
        self.ungates = UngateSender(api, cache, self.metrics)
        self.grouper = PodGrouper(api, self.binds.in_flight, self.clocks, defer=DEFER_SECONDS)
        # Watches may have been started before this loop existed (``kai-ray run`` lists while it
        # imports the scheduler); what they brought meanwhile reaches the cache first.
        self.watches = watches if watches is not None else Watches(api, dra=dra)
        self.watches.attach(cache)
        self.reflectors = self.watches.reflectors
        if self.watches.started_at is not None:
            self.startup.mark("watching", at=self.watches.started_at)
        self.state = LoopState()
        self.heap = HeapTrimmer()
        self.coordinator_health = CoordinatorHealth()
        self.steps = LoopSteps(self.loop_metrics, self.coordinator_health)
        self.decision_log = DecisionLog()
        self._stop = asyncio.Event()
        self.wakeup = Wakeup(cache.scheduler_name, self._stop)  # an iteration before the period is up
        cache.listeners.append(self.wakeup.on_watch_event)
        self._explaining: asyncio.Task[None] | None = None
        self._grouping: asyncio.Task[None] | None = None  # the pod grouper's pass in flight
        self._sending_evictions: asyncio.Task[None] | None = None

    def stop(self) -> None:
        self._stop.set()
        self.wakeup.nudge()
        self.watches.stop()

    async def run(self) -> None:
        self.watches.start()
        try:
            began = time.monotonic()
            self.startup.mark("loop")
            await self._start(began + self.sync_timeout)
            log.info(  # the records exist once the first deltas are taken (the watches only queue events)
                "watches synced in %.2fs: %d nodes, %d pods, %d pod groups, %d queues",
                time.monotonic() - began,
                len(self.cache.nodes),
                len(self.cache.pods),
                len(self.cache.raw_groups),
                len(self.cache.queues),
            )
            while not self._stop.is_set():
                started = time.monotonic()
                await self.iterate()
                self.state.last_iteration = time.monotonic()
                elapsed = time.monotonic() - started
                self.loop_metrics.iteration(elapsed)
                if elapsed > 10 * self.period:
                    log.warning("a scheduler iteration took %.1fs", elapsed)
                if self.coordinator_health.hopeless(time.monotonic()):
                    log.error(
                        "no coordinator could be started for %.0fs: giving up (and the Lease, if held)",
                        self.coordinator_health.give_up_after,
                    )
                    self.state.gave_up = True
                    self.stop()
                # A cycle stopped at its time budget left searches to go on with: the next starts
                # at once (the API work of this one goes on beside it), not a period later.
                wait = 0.0 if self.state.work_left else max(0.0, self.period - elapsed)
                await self.wakeup.rest(wait, elapsed)
        finally:
            if self._grouping is not None and not self._grouping.done():
                self._grouping.cancel()  # what it did not create, the next start creates
                await asyncio.gather(self._grouping, return_exceptions=True)
            await self.steps.drain(SHUTDOWN_GRACE_SECONDS)
            if self.usage is not None:
                await self.steps.run("usage", self.usage.close)  # keep the accounting for the next start
            await self.watches.close()

    async def _start(self, deadline: float) -> None:
        """The coordinator, fed with everything listed, built while the pods still come: every other
        kind first (the nodes make the shards' tables), then the pods page by page as they arrive,
        so the reading of the lists, the records and the tables overlap instead of queueing."""
        others = [r for r in self.reflectors if r.kind is not PODS]
        # While the nodes still come, the pods' pages that came are read into records already
        # (the coordinator, made from the nodes, gets them with its first deltas).
        await self._read_while_listing(others, deadline, lambda: asyncio.to_thread(self.cache.read_ahead))
        self.startup.mark("nodes")
        first = await asyncio.to_thread(self.cache.take_deltas, time.monotonic())
        self.coordinator = coordinator = self.coordinator_factory(len(self.cache.nodes))
        self._stream_binds(coordinator)
        await self.steps.locked(coordinator.apply, first)
        self.startup.mark("tables")
        pods = [r for r in self.reflectors if r.kind is PODS]
        # The pages so far go to the coordinator while the next ones come.
        await self._read_while_listing(pods, deadline, lambda: self.steps.locked(self._feed, coordinator))
        self.state.synced = True
        slowest = sorted(self.reflectors, key=lambda r: -r.stats.list_seconds)[:2]
        self.startup.mark("listed", ", ".join(f"{r.kind.plural} {r.stats.list_seconds:.2f}" for r in slowest))
        await self.steps.locked(self._feed, coordinator)
        self.startup.mark("decoded")

    async def _read_while_listing(
        self, reflectors: list[Reflector], deadline: float, read: Callable[[], Awaitable[None]]
    ) -> None:
        """Until ``reflectors`` have listed: ``read`` whatever the watches have brought so far."""
        while not all(r.stats.synced.is_set() for r in reflectors) and time.monotonic() < deadline:
            if self.cache.pending_events():
                await read()
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(PAGE_POLL_SECONDS):  # not wait_for: see Wakeup.rest
                        await asyncio.gather(*(r.stats.synced.wait() for r in reflectors))
        await self._wait_for_sync(reflectors, deadline)

    async def _wait_for_sync(self, reflectors: list[Reflector], deadline: float) -> None:
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):  # not wait_for: see Wakeup.rest
                await asyncio.gather(*(r.stats.synced.wait() for r in reflectors))
        except TimeoutError:
            missing = [r.kind.plural for r in reflectors if not r.stats.synced.is_set()]
            log.error(
                "not all watches synced within %ss (missing: %s); scheduling with what is known",
                self.sync_timeout,
                ", ".join(missing),
            )

    async def iterate(self) -> None:
        """One turn: feed changes, group pods, and (as leader) schedule, bind, evict, explain."""
        self.state.iterations += 1
        self.heap.maybe()  # a few milliseconds every few minutes, between two iterations' work
        coordinator = self.coordinator
        assert coordinator is not None
        # The cache turns watch events into deltas in the worker thread too: at a hundred thousand
        # pods, that work must not stall the watches and health checks on the event loop.
        self.wakeup.clear()
        await self.steps.run("apply", lambda: self.steps.locked(self._feed, coordinator))
        if self.pod_grouper and (self._grouping is None or self._grouping.done()):
            # Grouping runs beside the loop, one pass at a time: PodGroup creates for thousands of
            # new pods take the API's time, not the cycles'. A pod is scheduled once its group
            # exists (the watch brings the annotated pod); the others keep being decided meanwhile.
            ungrouped = self.cache.ungrouped()
            self._grouping = asyncio.ensure_future(self.steps.run("group", lambda: self.grouper.group(ungrouped)))
        now = time.time()
        leader = self.leadership.is_leader()
        if self.usage is not None:
            await self.steps.run("usage", lambda: self._feed_usage(coordinator, now, leader))
        if not leader:
            return
        result: list[CycleResult] = []

        async def cycle() -> None:
            result.append(await self.steps.locked(coordinator.cycle, now))

        await self.steps.run("cycle", cycle)
        self.state.cycle_ok = bool(result)
        if not result:
            self.state.cycle_failed_at = time.monotonic()
            return
        self.coordinator_health.decided()
        outcome = result[0]
        for _ in outcome.stats.failed_actions:  # logged where they failed; counted as the cycle's errors
            self.steps.metrics.failed("cycle")
        self.state.cycles += 1
        self.state.work_left = outcome.stats.cut_short
        if outcome.binds:
            stats = outcome.stats
            self.startup.mark(
                "cycled",
                f"open {stats.open_seconds:.2f}, actions {stats.session_seconds:.2f}, "
                f"commit {stats.commit_seconds:.2f}, close {stats.close_seconds - stats.commit_seconds:.2f}; "
                f"{len(outcome.binds)} binds",
            )
        self.decision_log.cycle(self.state.cycles, outcome)
        self.wakeup.waiting = self.decision_log.waiting
        # Binds and explanations go on in the background while the next cycle is computed:
        # the coordinator already counts the binds as placed, and only the latest
        # explanation matters. Their failures come back through bind_failed. The binds the
        # coordinator handed out as it committed them are on their way already.
        rest = outcome.binds[outcome.streamed :]
        if rest:
            self.steps.background("bind", lambda: self._bind(coordinator, rest))
        if outcome.ungates:  # like binds, beside the next cycle: the pods are only judged again if it fails
            ungates = outcome.ungates
            self.steps.background("ungate", lambda: self.ungates.send(ungates))
        await self._send_evictions(outcome)
        if outcome.job_clocks or self.clocks.retry or self.clocks.waiting:
            groups, live = self.cache.raw_groups, outcome.decisions.pod_groups  # every job of the session
            self.steps.background("clocks", lambda: self.clocks.write(outcome.job_clocks, groups.__contains__, live))
        if self.usage is not None:
            usage = self.usage
            await self.steps.run("usage", lambda: usage.after_cycle(now, outcome, self.cache.nodes.values()))
        if self._explaining is None or self._explaining.done():
            self._explaining = self.steps.background("status", lambda: self._explain(outcome))
        await self.steps.run("metrics", lambda: _sync(lambda: self.metrics.observe_cycle(outcome, self.cache.queues)))
        if time.monotonic() >= self._next_reservation_sweep:
            self._next_reservation_sweep = time.monotonic() + RESERVATION_SWEEP_SECONDS
            self.steps.background("reservations", self.reservations.sync_all)

    def _stream_binds(self, coordinator: CoordinatorLike) -> None:
        """Binds leave as the cycle commits them, run by run, not when the whole cycle is done: on a
        start with thousands of pods pending, the first is sent before the last is concluded."""
        if not isinstance(coordinator, StreamsBinds):
            return
        loop = asyncio.get_running_loop()

        def sink(binds: list[BindIntent]) -> None:  # on the cycle's thread
            loop.call_soon_threadsafe(self._send_binds, coordinator, binds)

        coordinator.bind_sink = sink

    def _send_binds(self, coordinator: CoordinatorLike, binds: list[BindIntent]) -> None:
        self.steps.background("bind", lambda: self._bind(coordinator, binds))

    def _watch_sharers(self, kind: Kind, event: str, obj: dict[str, Any]) -> None:
        """KAI's pod controller: when a pod that shares GPUs ends or goes, its groups' reservation
        pods are checked (the last sharer leaving deletes the reservation pod)."""
        if kind is not PODS or not self.leadership.is_leader():
            return
        groups = gpu_groups_of(obj)
        if groups and (event == "DELETED" or (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")):
            self.steps.background("reservations", lambda: self.reservations.sync_groups(groups))

    def _feed(self, coordinator: CoordinatorLike) -> None:
        coordinator.apply(self.cache.take_deltas(time.monotonic()))

    async def _feed_usage(self, coordinator: CoordinatorLike, now: float, leader: bool) -> None:
        assert self.usage is not None
        usage = await self.usage.before_cycle(now, leader)
        if usage is not None:
            await self.steps.locked(coordinator.apply, ClusterDeltas(queue_usage=usage))

    async def _bind(self, coordinator: CoordinatorLike, binds: list[BindIntent]) -> None:
        if not binds:
            return
        if not self.leadership.is_leader():  # fencing: the lease may have moved during the cycle
            await self.steps.locked(coordinator.bind_failed, [b.pod for b in binds])
            return
        bound = await self.binds.send(binds, lambda failed: self.steps.locked(coordinator.bind_failed, failed))
        self.state.binds += bound  # after the await: sends overlap, and each must add to the latest count

    async def _send_evictions(self, outcome: CycleResult) -> None:
        """Evictions go out beside the next cycle, which sees their pods releasing already
        (``expected_evictions``). One send at a time: a cycle with evictions of its own waits for
        the last cycle's to be sent, so a slow API server holds the loop back rather than a queue
        growing; a cycle without leaves retrying the ones a budget blocked to a later iteration."""
        self.evictions.hand_out(outcome)
        sending = self._sending_evictions
        if sending is not None and not sending.done():
            if not outcome.evictions:
                return
            await asyncio.wait({sending})
        self._sending_evictions = self.steps.background("evict", self._evict)

    async def _evict(self) -> None:
        evicted = await self.evictions.send()
        self.state.evictions += evicted  # after the await (see _bind)

    async def _explain(self, outcome: CycleResult) -> None:
        """Conditions and events from the cycle, with what the adapter knows better (``explain.py``):
        malformed objects, and pods backed off after failed binds."""
        notes = cache_notes(self.cache, self.bind_backoff, time.monotonic())
        await self.status.publish(outcome, self.cache, notes, problem_events(self.cache.problems_view))


async def _sync(action: Callable[[], None]) -> None:
    action()
