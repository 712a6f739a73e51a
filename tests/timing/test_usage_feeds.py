"""The running scheduler's accounting feed: usage before a cycle, credit after it, kept on the
Queues when a bucket closes, read back when the replica leads (again)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coordinator import CycleResult, Decisions
from k8s_adapter.usage_feeds import AccountingFeed
from kai_ray.config import UsageDBConfig
from tests.builders import node

CONFIG = UsageDBConfig.model_validate(
    {
        "clientType": "accounting",
        "usageParams": {"windowSize": "1h", "fetchInterval": "30s", "extraParams": {"resolution": "60s"}},
    }
)


class Store:
    def __init__(self) -> None:
        self.kept: dict[str, Mapping[str, Any]] = {}
        self.saves = 0
        self.pruned = False

    async def load(self) -> dict[str, Mapping[str, Any]]:
        return dict(self.kept)

    async def save(self, records: Mapping[str, Mapping[str, Any]]) -> int:
        self.saves += 1
        self.kept = dict(records)
        return len(records)


def result(gpus: float) -> CycleResult:
    decisions = Decisions()
    decisions.queues["q"] = {"allocated": {"gpu": gpus, "cpu": 0, "memory": 0}, "fairShare": {}}
    return CycleResult(decisions)


async def test_usage_is_accounted_kept_and_read_back_by_the_next_leader() -> None:
    store = Store()
    feed = AccountingFeed(CONFIG, store)  # type: ignore[arg-type]
    nodes = [node("a", gpu=8)]
    assert await feed.before_cycle(0, leader=True) == {}
    for t in range(0, 600, 10):  # ten minutes of 4 of 8 GPUs
        if t:
            await feed.before_cycle(t, leader=True)
        await feed.after_cycle(t, result(4), nodes)
    assert store.saves == 9  # once per closed minute
    assert await feed.before_cycle(600, leader=True) is not None  # a refresh is due every 30 s
    assert feed.ledger.usage(600)["q"][0] == 0.5

    standby = AccountingFeed(CONFIG, store)  # type: ignore[arg-type]
    assert await standby.before_cycle(610, leader=False) is None  # standbys account nothing
    taken_over = await standby.before_cycle(620, leader=True)
    assert taken_over is not None and abs(taken_over["q"][0] - 0.5) < 0.02  # from the kept minutes

    await feed.close()
    assert store.saves == 10  # a clean stop keeps the minute in progress too
