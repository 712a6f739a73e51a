"""Time-based fair share in the running scheduler: where queue usage comes from, per config.

A feed gives the loop the queues' usage to send the coordinator before a cycle (when it has
changed, at most every ``fetchInterval``) and hears about each cycle's outcome after it.

- ``AccountingFeed`` (``clientType: accounting``): kai-ray's own accounting. After every cycle
  it credits each queue's allocation (the cycle's decisions, ancestors included, as KAI's queue
  metrics roll up) and the cluster's capacity to a ``UsageLedger``; it keeps the ledger on the
  Queues (``QueueUsageStore``) whenever a bucket closes and when the scheduler stops, and reads
  it back when it becomes the leader, so a restart or a failover carries on.
- ``PrometheusFeed`` (``clientType: prometheus``): KAI's queries against a Prometheus server,
  every ``fetchInterval`` in a worker thread. Usage older than ``stalenessPeriod`` (Prometheus
  unreachable) is dropped with a warning, as KAI's design says: the division falls back to
  plain over-quota weights rather than steering by old numbers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Protocol

from coordinator import CycleResult
from coordinator.fairshare import RESOURCES, UsageLedger, UsageWindow, capacity_of, default_resolution
from k8s_adapter.api import KubeApi
from k8s_adapter.prometheus_usage import PrometheusUsageClient
from k8s_adapter.usage_store import QueueUsageStore
from kai_ray.config import UsageDBConfig
from kai_ray.model import Node

log = logging.getLogger(__name__)
Usage = dict[str, tuple[float, float, float]]


class UsageFeed(Protocol):
    async def before_cycle(self, now: float, leader: bool) -> Usage | None:
        """The usage to send the coordinator now, or None when it has not changed."""

    async def after_cycle(self, now: float, result: CycleResult, nodes: Iterable[Node]) -> None: ...

    async def close(self) -> None: ...


def make_feed(config: UsageDBConfig, api: KubeApi) -> UsageFeed:
    if config.clientType == "prometheus":
        return PrometheusFeed(config)
    return AccountingFeed(config, QueueUsageStore(api))


class AccountingFeed:
    def __init__(self, config: UsageDBConfig, store: QueueUsageStore | None) -> None:
        self.params = config.usageParams
        self.store = store
        self.ledger = self._fresh()
        self.loaded = False
        self.next_refresh = float("-inf")
        self.kept_bucket: int | None = None

    def _fresh(self) -> UsageLedger:
        return UsageLedger(UsageWindow.of(self.params), default_resolution(self.params))

    async def before_cycle(self, now: float, leader: bool) -> Usage | None:
        if not leader:
            # Another replica accounts now; take what it kept when this one leads again (unless
            # the cluster cannot keep it, when memory is all there is).
            self.loaded = self.loaded and self.store is not None and self.store.pruned
            return None
        if not self.loaded:
            await self._load()
        if now < self.next_refresh:
            return None
        self.next_refresh = now + self.params.fetchInterval
        return self.ledger.usage(now)

    async def _load(self) -> None:
        self.loaded = True
        if self.store is None:
            return
        records = await self.store.load()
        self.ledger = self._fresh()
        unreadable = self.ledger.restore(records)
        if unreadable:
            log.warning("usage history of queues %s could not be read; they start from nothing", unreadable)
        log.info("usage history read back for %d queues", len(records) - len(unreadable))

    async def after_cycle(self, now: float, result: CycleResult, nodes: Iterable[Node]) -> None:
        allocated = {
            name: tuple(float(figures["allocated"][r]) for r in RESOURCES)
            for name, figures in result.decisions.queues.items()
        }
        self.ledger.observe(now, allocated, capacity_of(nodes))
        bucket = self.ledger.bucket(now)
        if self.kept_bucket is None:
            self.kept_bucket = bucket
        elif bucket != self.kept_bucket:
            self.kept_bucket = bucket
            await self.keep()

    async def keep(self) -> None:
        if self.store is not None and self.loaded:
            await self.store.save(self.ledger.records())

    async def close(self) -> None:
        await self.keep()


class PrometheusFeed:
    def __init__(self, config: UsageDBConfig, client: PrometheusUsageClient | None = None) -> None:
        self.params = config.usageParams
        self.client = client or PrometheusUsageClient(config)
        self.usage: Usage | None = None
        self.fetched_at: float | None = None
        self.fresh = False  # a fetch arrived since the coordinator was last told
        self.next_fetch = float("-inf")
        self.fetching: asyncio.Task[None] | None = None
        self.stale = False

    async def before_cycle(self, now: float, leader: bool) -> Usage | None:
        if now >= self.next_fetch and (self.fetching is None or self.fetching.done()):
            self.next_fetch = now + self.params.fetchInterval
            self.fetching = asyncio.ensure_future(self._fetch(now))
            if self.fetched_at is None:  # KAI waits for the first usage before its first session
                await asyncio.wait({self.fetching}, timeout=max(self.client.timeout * 6, 1.0))
        if self.fetched_at is not None and now - self.fetched_at > self.params.stalenessPeriod:
            if not self.stale:
                log.warning(
                    "queue usage is %.0fs old (stalenessPeriod %.0fs): fair share ignores it until Prometheus answers",
                    now - self.fetched_at,
                    self.params.stalenessPeriod,
                )
                self.stale = True
                return {}
            return None
        if not self.fresh or self.usage is None:
            return None
        self.fresh = False
        return dict(self.usage)

    async def _fetch(self, now: float) -> None:
        try:
            usage = await asyncio.to_thread(self.client.fetch, now)
        except Exception as exc:  # a failed query keeps the last usage until it goes stale
            log.error("failed to fetch queue usage: %s", exc)
            return
        self.usage, self.fetched_at, self.fresh, self.stale = usage, now, True, False

    async def after_cycle(self, now: float, result: CycleResult, nodes: Iterable[Node]) -> None:
        return None

    async def close(self) -> None:
        if self.fetching is not None and not self.fetching.done():
            await asyncio.wait({self.fetching}, timeout=self.client.timeout)
