"""Time-based fair share in the simulator: kai-ray's accounting in simulated time.

The simulator plays the part of the adapter's ``AccountingFeed``: after every cycle it credits
each queue's allocation (the cycle's decisions, ancestors included) and the cluster's capacity
to a ``UsageLedger``, and every ``fetchInterval`` it hands the coordinator the queues' usage
with the cycle's deltas. Whatever ``clientType`` the config names, the simulator accounts
itself (there is no Prometheus in simulated time). It also keeps each queue's usage over time
for the report and the plots.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from coordinator.coordinator import CycleResult
from coordinator.fairshare import RESOURCES, UsageLedger, UsageWindow, capacity_of, default_resolution
from kai_ray.config import UsageDBConfig
from kai_ray.model import Node


class SimUsage:
    def __init__(self, config: UsageDBConfig, nodes: Iterable[Node]) -> None:
        params = config.usageParams
        self.ledger = UsageLedger(UsageWindow.of(params), default_resolution(params))
        self.refresh = max(params.fetchInterval, 1e-3)
        self.capacity = capacity_of(nodes)
        self.next_refresh = 0.0
        self.current: dict[str, tuple[float, float, float]] = {}
        self.timeline: dict[str, list[tuple[float, float]]] = defaultdict(list)  # queue -> (t, GPU usage)

    def due(self, now: float) -> bool:
        return now >= self.next_refresh

    def next_time(self) -> float:
        return self.next_refresh

    def for_cycle(self, now: float) -> Mapping[str, tuple[float, float, float]] | None:
        """The usage to send with this cycle's deltas, when a refresh is due."""
        if not self.due(now):
            return None
        self.next_refresh = now + self.refresh
        self.current = self.ledger.usage(now)
        for queue, values in self.current.items():
            self.timeline[queue].append((now, values[0]))
        return self.current

    def after(self, now: float, result: CycleResult) -> None:
        allocated = {
            name: tuple(float(figures["allocated"][r]) for r in RESOURCES)
            for name, figures in result.decisions.queues.items()
        }
        self.ledger.observe(now, allocated, self.capacity)
