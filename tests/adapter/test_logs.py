"""What `kai-ray run -v` logs: one structured line per decision, a summary per busy cycle, and
expected conditions (a lease held by another replica, a 409) in one line, never a traceback."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter

import pytest

from k8s_adapter.leader import _quiet_lease_lock
from kai_ray.logs import FIELDS, JsonFormatter, TextFormatter, fields
from tests.adapter.conftest import Env, pod, queue, until

PODS = "/api/v1/namespaces/default/pods"
QUEUES = "/apis/scheduling.run.ai/v2/queues"


def _records(caplog: pytest.LogCaptureFixture, message: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "kai_ray.decisions" and r.getMessage() == message]


async def test_every_bind_eviction_and_new_reason_is_one_line_with_its_fields(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="kai_ray.decisions")
    await env.create(QUEUES, queue("spare", gpu_quota=0))
    await env.create(QUEUES, queue("owner", gpu_quota=16))
    for i in range(4):
        await env.create(PODS, pod(f"spare-{i}", gpus=8, queue_name="spare"))
    loop = env.loop()
    task = asyncio.create_task(loop.run())
    try:
        await until(lambda: loop.state.binds == 4, timeout=20)
        await env.create(PODS, pod("mine", gpus=8, queue_name="owner"))
        await env.create(PODS, pod("huge", gpus=16, queue_name="owner"))
        await until(lambda: loop.state.binds == 5 and loop.state.evictions == 1, timeout=30)
        await asyncio.sleep(0.5)  # more cycles in which nothing changes
    finally:
        loop.stop()
        await asyncio.wait_for(task, 10)

    binds = _records(caplog, "bind")
    assert Counter(getattr(r, FIELDS)["pod"] for r in binds) == Counter(
        [f"default/spare-{i}" for i in range(4)] + ["default/mine"]
    )
    mine = next(getattr(r, FIELDS) for r in binds if getattr(r, FIELDS)["pod"] == "default/mine")
    # placed by reclaim onto the victim's GPUs (pipelined), bound by allocate once they were free
    [pipelined] = [getattr(r, FIELDS) for r in _records(caplog, "pipeline")]
    assert pipelined["pod"] == "default/mine" and pipelined["action"] == "reclaim"
    assert mine["action"] == "allocate" and mine["node"] == pipelined["node"] and mine["cycle"] > pipelined["cycle"]
    [evict] = _records(caplog, "evict")
    assert getattr(evict, FIELDS)["action"] == "reclaim"
    assert getattr(evict, FIELDS)["preemptor"].startswith("default/pg-mine-")  # the pod group KAI would name
    huge = [getattr(r, FIELDS) for r in _records(caplog, "pending") if getattr(r, FIELDS)["pod"] == "default/huge"]
    assert len(huge) == 1 and "Max GPU resources available in a single node is topped at 8" in huge[0]["reason"]
    summaries = [r for r in caplog.records if r.name == "kai_ray.decisions" and r.getMessage().startswith("cycle ")]
    busy = [r for r in summaries if r.levelno == logging.INFO]
    assert sum(getattr(r, FIELDS)["bound"] for r in busy) == 5
    assert len(busy) < len(summaries)  # quiet cycles are debug lines, not info
    assert not any(r.exc_info for r in caplog.records)


def test_json_lines_carry_the_fields_and_text_lines_end_with_them() -> None:
    record = logging.LogRecord("kai_ray.decisions", logging.DEBUG, __file__, 1, "bind", (), None)
    for key, value in fields(cycle=7, action="allocate", pod="ns/p", node="n1", preemptor=None)[FIELDS].items():
        setattr(record, FIELDS, {**getattr(record, FIELDS, {}), key: value})
    entry = json.loads(JsonFormatter().format(record))
    assert entry["msg"] == "bind" and entry["level"] == "debug" and entry["logger"] == "kai_ray.decisions"
    assert (entry["cycle"], entry["action"], entry["pod"], entry["node"]) == (7, "allocate", "ns/p", "n1")
    assert "preemptor" not in entry
    text = TextFormatter().format(record)
    assert text.endswith("kai_ray.decisions: bind cycle=7 action=allocate pod=ns/p node=n1")
    record.__dict__[FIELDS] = {"reason": "no nodes with enough resources"}
    assert TextFormatter().format(record).endswith('reason="no nodes with enough resources"')


async def test_a_lease_held_by_another_replica_is_one_quiet_line(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    from kubernetes_asyncio.leaderelection.leaderelectionrecord import LeaderElectionRecord

    caplog.set_level(logging.DEBUG)
    Lock = _quiet_lease_lock()
    record = LeaderElectionRecord("a", "10", "2026-01-01 00:00:00.000000", "2026-01-01 00:00:00.000000")
    first, second = Lock("kai-ray", "default", "a", env.api.client), Lock("kai-ray", "default", "b", env.api.client)
    assert await first.create("kai-ray", "default", record)
    assert not await second.create("kai-ray", "default", record)  # 409: the lease exists
    lines = [r for r in caplog.records if "another replica holds it" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.DEBUG
    assert not any(r.exc_info for r in caplog.records)
