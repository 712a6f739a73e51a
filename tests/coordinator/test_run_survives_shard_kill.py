"""`kai-ray run` with two shard actors against the dev cluster: one shard actor's process is
killed. The cycle that meets the dead actor fails and /healthz says so; the coordinator
replaces the actor, rebuilds it from its model, and pods keep binding afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import psutil

from devcluster import DevClusterThread
from kai_ray.app.sim.cluster import synthetic_nodes
from tests.adapter.conftest import pod, queue
from tests.adapter.test_two_replicas import _free_port

REPO = Path(__file__).resolve().parents[2]


def _health(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return -1


def _wait(check: Callable[[], bool], timeout: float, every: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(every)


def _shard_processes(root: int) -> list[psutil.Process]:
    """The shard actors' worker processes among the scheduler's descendants (Ray titles them)."""
    found = []
    for child in psutil.Process(root).children(recursive=True):
        try:
            if "ray::Shard" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:
            continue
    return found


def test_pods_keep_binding_after_a_shard_actor_process_is_killed(tmp_path: Path) -> None:
    with DevClusterThread(nodes=synthetic_nodes(6), start_delay=0) as dev:
        kubeconfig = dev.write_kubeconfig(tmp_path / "kubeconfig")
        dev.call(dev.cluster.create, "scheduling.run.ai", "v2", "queues", queue("team"))
        port = _free_port()
        scheduler = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kai_ray",
                "run",
                "--kubeconfig",
                str(kubeconfig),
                "--metrics-port",
                str(port),
                "--period",
                "0.2",
                "--shards",
                "2",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Its own Ray instance, even when this test process runs one (Ray would join that).
            env={**os.environ, "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0", "RAY_ADDRESS": "local"},
            cwd=REPO,
        )

        def bound(name: str) -> bool:
            found = dev.call(dev.cluster.get, "", "v1", "pods", name, "default")
            return bool(found and found["spec"].get("nodeName"))

        try:
            dev.call(dev.cluster.create, "", "v1", "pods", pod("before", queue_name="team"), "default")
            _wait(lambda: bound("before"), timeout=120)  # Ray start-up, two shard actors, first cycles
            assert _health(port) == 200
            shards = _shard_processes(scheduler.pid)
            assert len(shards) == 2, [p.cmdline() for p in shards]
            os.kill(shards[0].pid, signal.SIGKILL)
            # The next cycle meets the dead actor and fails; /healthz reports it until a cycle succeeds.
            _wait(lambda: _health(port) == 503, timeout=30, every=0.02)
            for i in range(4):
                dev.call(dev.cluster.create, "", "v1", "pods", pod(f"after-{i}", queue_name="team"), "default")
            _wait(lambda: all(bound(f"after-{i}") for i in range(4)), timeout=120)
            _wait(lambda: _health(port) == 200, timeout=30)
            assert len(_shard_processes(scheduler.pid)) == 2  # the dead one was replaced
        finally:
            scheduler.terminate()
            try:
                scheduler.wait(timeout=30)
            except subprocess.TimeoutExpired:
                scheduler.kill()
                scheduler.wait()
