"""Queue usage from a Prometheus server, queried as KAI's usage DB client queries it.

For each resource KAI asks two instant queries and divides: the queue allocation metric
(``kai_queue_allocated_gpus{queue_name=...}``, which kai-ray's /metrics exports under KAI's
name) and the cluster capacity metric (kube-state-metrics' ``kube_node_status_capacity``),
each summed over the window at the query resolution, each multiplied by the decay
``0.5^((now - time()) / halfLife)`` when a half-life is set::

    sum_over_time(((kai_queue_allocated_gpus) * (0.5^((1762777987 - time()) / 600)))[1w:1m])

A sliding window ends now. For a tumbling window kai-ray asks the same query over the time
since the last reset (KAI's own tumbling query is a range query on ``sum_over_time`` of an
instant vector, which Prometheus refuses). Metric names, the resolution and the timeout can
be overridden in ``usageParams.extraParams`` as in KAI.

The HTTP client is ``prometheus-api-client`` (blocking; the loop calls it in a thread).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from coordinator.fairshare import UsageWindow
from kai_ray.config import PROMETHEUS_EXTRA_PARAMS, UsageDBConfig
from kai_ray.model.fairshare import RESOURCES
from kai_ray.quantity import parse_duration

log = logging.getLogger(__name__)
QUEUE_LABEL = "queue_name"


class UsageQueryError(Exception):
    """A usage query failed or answered something KAI's client would not accept."""


@dataclass(frozen=True, slots=True)
class UsageQueries:
    """The PromQL KAI's client sends, built for one moment."""

    window: UsageWindow
    resolution: float
    allocation: dict[str, str]  # resource -> metric (an expression)
    capacity: dict[str, str]

    @staticmethod
    def of(config: UsageDBConfig) -> UsageQueries:
        params = config.usageParams
        metric = {key: params.extra(key, default) for key, default in PROMETHEUS_EXTRA_PARAMS.items()}
        return UsageQueries(
            UsageWindow.of(params),
            parse_duration(metric["queryResolution"]),
            {r: metric[f"{r}AllocationMetric"] for r in RESOURCES},
            {r: metric[f"{r}CapacityMetric"] for r in RESOURCES},
        )

    def over_window(self, expression: str, now: float) -> str:
        if self.window.half_life > 0:
            decay = f"0.5^(({math.floor(now)} - time()) / {self.window.half_life:f})"
            expression = f"(({expression}) * ({decay}))"
        span = now - self.window.start(now)
        return f"sum_over_time(({expression})[{_promql_duration(span)}:{_promql_duration(self.resolution)}])"


def _promql_duration(seconds: float) -> str:
    """A PromQL duration literal: whole seconds, or milliseconds below a second's precision."""
    if seconds <= 0:
        return "0s"
    millis = round(seconds * 1000)
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"


class PrometheusUsageClient:
    def __init__(self, config: UsageDBConfig, connection: Any | None = None) -> None:
        from prometheus_api_client import PrometheusConnect

        self.queries = UsageQueries.of(config)
        self.timeout = parse_duration(config.usageParams.extra("usageQueryTimeout", "10s"))
        self.connection = connection or PrometheusConnect(url=config.connectionString.rstrip("/"), disable_ssl=False)

    def fetch(self, now: float) -> dict[str, tuple[float, float, float]]:
        """Every queue's usage over capacity, per resource (KAI's GetResourceUsage)."""
        capacity = [self._capacity(r, now) for r in RESOURCES]
        usage: dict[str, list[float]] = {}
        for i, resource in enumerate(RESOURCES):
            for queue, value in self._allocations(resource, now).items():
                usage.setdefault(queue, [0.0, 0.0, 0.0])[i] = value / capacity[i] if capacity[i] else 0.0
        return {queue: (v[0], v[1], v[2]) for queue, v in usage.items()}

    def _query(self, expression: str, now: float) -> list[dict[str, Any]]:
        query = self.queries.over_window(expression, now)
        try:
            result = self.connection.custom_query(query, params={"time": f"{now:.3f}"}, timeout=self.timeout)
        except Exception as exc:  # the client raises its own, requests' and JSON errors alike
            raise UsageQueryError(f"query {query} failed: {exc}") from exc
        if not isinstance(result, list) or any(not isinstance(s, dict) or "value" not in s for s in result):
            raise UsageQueryError(f"query {query}: expected a vector, got {str(result)[:200]}")
        return result

    def _capacity(self, resource: str, now: float) -> float:
        samples = self._query(self.queries.capacity[resource], now)
        if not samples:
            raise UsageQueryError(f"no data for the cluster {resource} capacity ({self.queries.capacity[resource]})")
        return _value(samples[0])

    def _allocations(self, resource: str, now: float) -> dict[str, float]:
        samples = self._query(self.queries.allocation[resource], now)
        if not samples:
            log.info("no %s usage data yet (%s)", resource, self.queries.allocation[resource])
        return {str(s.get("metric", {}).get(QUEUE_LABEL, "")): _value(s) for s in samples}


def _value(sample: dict[str, Any]) -> float:
    try:
        value = float(sample["value"][1])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise UsageQueryError(f"a sample without a number: {sample}") from exc
    return value if math.isfinite(value) else 0.0
