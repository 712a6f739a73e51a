"""Kill `kai-ray run` mid-run against the dev cluster and start it again: min-runtime protection,
the stale-gang clock and the usage history carry on where they were.

One 8-GPU node, queues a and b under dept. Before the kill: queue a runs GPU jobs (its usage
grows and is kept on the Queue), the long job starts (its last-start time goes on the PodGroup),
and a gang of queue b loses a pod (its stale time goes on the PodGroup). While the scheduler is
down, queue b asks for the whole node. After the restart:

- the long job is reclaimed only when queue a's 25 s reclaimMinRuntime, counted from its start
  *before* the kill, has passed (a scheduler that forgot would reclaim at once: b's fair share,
  driven by a's usage, is the whole node);
- the broken gang is evicted 20 s after it broke before the kill, not 20 s after the restart;
- queue a's usage history keeps its first bucket and only grows.
"""

from __future__ import annotations

import asyncio
import calendar
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import DevCluster
from k8s_adapter.api import KubeApi, connect
from kai_ray.app.sim.cluster import synthetic_nodes
from tests.adapter.conftest import pod, pod_group, queue
from tests.timing.prometheus_server import free_port

PODS = "/api/v1/namespaces/default/pods"
QUEUES = "/apis/scheduling.run.ai/v2/queues"
GROUPS = "/apis/scheduling.run.ai/v2alpha2/namespaces/default/podgroups"
MIN_RUNTIME = 25.0
GRACE = 20.0
CONFIG = {
    "kValue": 2.0,  # a queue that used three quarters of the cluster gets no over-quota share
    "victimSearchBackoff": "0s",  # search every cycle, as KAI: the reclaim comes the moment protection ends
    "usageDBConfig": {
        "clientType": "accounting",
        "usageParams": {"windowSize": "10m", "fetchInterval": "1s", "extraParams": {"resolution": "1s"}},
    },
}


def _epoch(stamp: str) -> float:
    return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))


class Scheduler:
    """`kai-ray run` as a separate process, killed the hard way."""

    def __init__(self, kubeconfig: Path, config: Path, log: Path) -> None:
        self.args = [
            sys.executable,
            "-m",
            "kai_ray",
            "run",
            "--kubeconfig",
            str(kubeconfig),
            "--config",
            str(config),
            "--period",
            "0.2",
            "--shards",
            "0",
        ]
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [*self.args, "--metrics-port", str(free_port())], stdout=out, stderr=subprocess.STDOUT
            )

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)


async def _wait(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


@pytest.mark.timeout(240)
async def test_protections_timers_and_usage_survive_a_killed_scheduler(tmp_path: Path) -> None:
    cluster = DevCluster(nodes=synthetic_nodes(1), start_delay=0.05, max_grace=0.3, bookmark_seconds=0.5)
    await cluster.start()
    api = await connect(str(cluster.write_kubeconfig(tmp_path / "kubeconfig")))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    scheduler = Scheduler(tmp_path / "kubeconfig", config, tmp_path / "scheduler.log")
    try:
        await _scenario(cluster, api, scheduler)
    except BaseException:
        print((tmp_path / "scheduler.log").read_text()[-4000:])
        raise
    finally:
        scheduler.kill()
        await api.close()
        await cluster.stop()


async def _scenario(cluster: DevCluster, api: KubeApi, scheduler: Scheduler) -> None:
    async def create(path: str, obj: dict[str, Any]) -> None:
        await api.request("POST", path, body=obj)

    def pods() -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in cluster.objects("", "v1", "pods", "default")}

    def group(name: str) -> dict[str, Any]:
        [found] = [
            g
            for g in cluster.objects("scheduling.run.ai", "v2alpha2", "podgroups", "default")
            if g["metadata"]["name"] == name
        ]
        return found

    def usage_record() -> dict[str, Any] | None:
        [found] = [q for q in cluster.objects("scheduling.run.ai", "v2", "queues") if q["metadata"]["name"] == "a"]
        record: dict[str, Any] | None = (found.get("status") or {}).get("usageHistory")
        return record

    def gone(name: str) -> bool:
        p = pods().get(name)
        return p is None or bool(p["metadata"].get("deletionTimestamp"))

    await create(QUEUES, queue("dept", gpu_quota=0))
    a = queue("a", gpu_quota=0, parent="dept")
    a["spec"]["reclaimMinRuntime"] = f"{MIN_RUNTIME:g}s"
    await create(QUEUES, a)
    await create(QUEUES, queue("b", gpu_quota=0, parent="dept"))
    scheduler.start()

    # Queue a: a short 8-GPU job, then the long one; queue b: a gang of two CPU pods.
    await create(GROUPS, pod_group("short", "a", 1))
    await create(PODS, pod("short-0", gpus=8, group="short", **{"kai-ray.dev/run-seconds": "4"}))
    gang = pod_group("gang", "b", 2)
    gang["spec"]["stalenessGracePeriod"] = f"{GRACE:g}s"
    await create(GROUPS, gang)
    for i in range(2):
        await create(PODS, pod(f"gang-{i}", gpus=0, group="gang"))
    await _wait(lambda: all(pods()[f"gang-{i}"]["spec"].get("nodeName") for i in range(2)), 60, "the gang to run")
    await api.request("DELETE", f"{PODS}/gang-1")  # the gang is now below its minimum: stale
    stale = await _wait(
        lambda: group("gang")["metadata"].get("annotations", {}).get("kai.scheduler/stale-podgroup-timestamp"),
        30,
        "the stale timestamp",
    )
    await create(GROUPS, pod_group("long", "a", 1))
    await create(PODS, pod("long-0", gpus=8, group="long"))
    started = await _wait(
        lambda: group("long")["metadata"].get("annotations", {}).get("kai.scheduler/last-start-timestamp"),
        60,
        "the long job to start",
    )
    await asyncio.sleep(2.5)  # a few more accounting buckets close and are kept
    before = await _wait(usage_record, 30, "the usage history on queue a")

    scheduler.kill()
    killed_at = time.time()
    assert not gone("long-0") and not gone("gang-0")
    await create(GROUPS, pod_group("reclaimer", "b", 1))
    await create(PODS, pod("reclaimer-0", gpus=8, group="reclaimer"))
    scheduler.start()
    restarted_at = time.time()
    assert restarted_at < _epoch(started) + MIN_RUNTIME - 5, "the restart came too late to prove anything"

    gang_evicted = await _wait(lambda: gone("gang-0") and time.time(), 90, "the stale gang's eviction")
    long_evicted = await _wait(lambda: gone("long-0") and time.time(), 90, "the reclaim of the long job")
    await _wait(lambda: pods()["reclaimer-0"]["spec"].get("nodeName"), 60, "the reclaimer to be bound")
    after = usage_record()

    # The stale clock went on from before the kill: not a fresh 20 s from the restart.
    assert _epoch(stale) + GRACE - 1 <= gang_evicted < max(restarted_at, _epoch(stale) + GRACE) + 6
    assert gang_evicted < restarted_at + GRACE - 3
    # The long job stayed protected for its queue's minimum runtime, counted from its first start.
    assert long_evicted >= _epoch(started) + MIN_RUNTIME - 0.5
    assert long_evicted < _epoch(started) + MIN_RUNTIME + 10
    # The usage history kept its beginning and grew.
    assert after is not None and after["firstBucket"] == before["firstBucket"]
    gpu_seconds = [sum(row[0] for row in record["allocated"]) for record in (before, after)]
    assert gpu_seconds[1] > gpu_seconds[0] >= 8 * 4 and killed_at > 0
