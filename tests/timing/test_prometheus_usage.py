"""Queue usage from Prometheus, queried as KAI queries it, against responses recorded from a real
Prometheus. The live test is in the e2e tier (tests/e2e/test_prometheus_live.py); run it with
KAI_RAY_RECORD_PROMETHEUS=1 to refresh the recording.
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlencode
from urllib.request import urlopen

import pytest

from k8s_adapter.prometheus_usage import PrometheusUsageClient, UsageQueries, UsageQueryError
from k8s_adapter.usage_feeds import PrometheusFeed
from kai_ray.config import UsageDBConfig
from kai_ray.model.fairshare import RESOURCES
from tests.timing.prometheus_server import RECORDED, replay

# Two queues on a 16-GPU, 64-core, 256 GB cluster (cpu in cores, memory in bytes, as the metrics are).
ALLOCATED = {"research": (12.0, 24.0, 96e9), "team": (4.0, 8.0, 32e9)}
CAPACITY = (16.0, 64.0, 256e9)
EXPECTED = {"research": (0.75, 0.375, 0.375), "team": (0.25, 0.125, 0.125)}
RECORDING = RECORDED / "prometheus_usage.json"


def usage_config(url: str) -> UsageDBConfig:
    return UsageDBConfig.model_validate(
        {
            "clientType": "prometheus",
            "connectionString": url,
            "usageParams": {"windowSize": "30s", "halfLifePeriod": "10s", "extraParams": {"queryResolution": "1s"}},
        }
    )


def test_the_queries_are_kais() -> None:
    queries = UsageQueries.of(usage_config("http://x"))
    assert queries.over_window(queries.allocation["gpu"], 1762777987.4) == (
        "sum_over_time((((kai_queue_allocated_gpus) * (0.5^((1762777987 - time()) / 10.000000))))[30s:1s])"
    )
    assert queries.capacity["cpu"] == 'sum(kube_node_status_capacity{resource="cpu"})'
    tumbling = UsageDBConfig.model_validate(
        {
            "clientType": "prometheus",
            "connectionString": "http://x",
            "usageParams": {"windowSize": "1h", "windowType": "tumbling", "tumblingWindowStartTime": 0},
        }
    )
    # 30 minutes after the last hourly reset: the window so far, at KAI's default 1m resolution.
    assert UsageQueries.of(tumbling).over_window("m", 3600 * 5 + 1800) == "sum_over_time((m)[1800s:60s])"


def _approx(usage: dict[str, tuple[float, float, float]]) -> dict[str, Any]:
    return {q: pytest.approx(v, rel=1e-6) for q, v in usage.items()}


def record(url: str, queries: UsageQueries, now: float, usage: dict[str, tuple[float, float, float]]) -> None:
    answers = {}
    for resource in RESOURCES:
        for metric in (queries.capacity[resource], queries.allocation[resource]):
            query = queries.over_window(metric, now)
            with urlopen(f"{url}/api/v1/query?" + urlencode({"query": query, "time": f"{now:.3f}"})) as answer:  # noqa: S310
                answers[query] = json.load(answer)
    RECORDING.write_text(json.dumps({"now": now, "usage": usage, "answers": answers}, indent=1) + "\n")


def test_usage_from_recorded_prometheus_answers() -> None:
    recording = json.loads(RECORDING.read_text())
    with replay(recording["answers"]) as (url, asked):
        client = PrometheusUsageClient(usage_config(url))
        usage = client.fetch(recording["now"])
    assert usage == _approx(EXPECTED)
    queries = client.queries
    assert asked == [queries.over_window(queries.capacity[r], recording["now"]) for r in RESOURCES] + [
        queries.over_window(queries.allocation[r], recording["now"]) for r in RESOURCES
    ]


def test_a_query_prometheus_refuses_is_an_error_not_a_zero() -> None:
    with replay({}) as (url, _), pytest.raises(UsageQueryError, match="failed"):
        PrometheusUsageClient(usage_config(url)).fetch(time.time())


async def test_usage_goes_stale_when_prometheus_stops_answering() -> None:
    recording = json.loads(RECORDING.read_text())
    now = recording["now"]
    config = usage_config("http://unused")
    config = config.model_copy(
        update={"usageParams": config.usageParams.model_copy(update={"fetchInterval": 10.0, "stalenessPeriod": 30.0})}
    )
    with replay(recording["answers"]) as (url, _):
        feed = PrometheusFeed(config, PrometheusUsageClient(usage_config(url)))
        first = await feed.before_cycle(now, leader=True)  # the first fetch is awaited, as KAI waits
    assert first == _approx(EXPECTED)
    assert await feed.before_cycle(now + 1, leader=True) is None  # nothing new to tell
    with replay({}) as (url, _):
        feed.client = PrometheusUsageClient(usage_config(url))
        await feed.before_cycle(now + 20, leader=True)  # a failing fetch keeps the last usage...
        await feed.close()
        assert await feed.before_cycle(now + 25, leader=True) is None
        assert await feed.before_cycle(now + 31, leader=True) == {}  # ...until it is stale: dropped
        await feed.close()
