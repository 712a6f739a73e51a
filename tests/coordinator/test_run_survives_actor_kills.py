"""`kai-ray run` with two shard actors against the dev cluster: one shard actor's process is
killed, or the coordinator actor's. The cycle that meets the dead actor fails and /healthz (or
/readyz, for the coordinator) says so; the actor is replaced, rebuilt from the model its owner
keeps, and pods keep binding afterwards."""

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


def _health(port: int, path: str = "healthz") -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/{path}", timeout=1) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return -1


def _metrics(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as response:
            return str(response.read().decode())
    except OSError:
        return ""


def _wait(check: Callable[[], bool], timeout: float, every: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(every)


def _actor_processes(root: int, title: str = "ray::Shard") -> list[psutil.Process]:
    """Actors' worker processes among the scheduler's descendants (Ray titles them by class)."""
    found = []
    for child in psutil.Process(root).children(recursive=True):
        try:
            if title in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:
            continue
    return found


def _kill_and_keep_binding(tmp_path: Path, coordinator: bool) -> None:
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
            shards = _actor_processes(scheduler.pid)
            assert len(shards) == 2, [p.cmdline() for p in shards]
            if coordinator:
                (host,) = _actor_processes(scheduler.pid, "ray::_CoordinatorHost")
                os.kill(host.pid, signal.SIGKILL)
                # The next call meets the dead actor and a new one is started (not ready until it
                # has decided a cycle: too short a moment to poll for reliably; the metric counts it).
                _wait(lambda: 'kai_ray_coordinator_losses_total{replaced="true"} 1.0' in _metrics(port), timeout=60)
            else:
                os.kill(shards[0].pid, signal.SIGKILL)
                # The next cycle meets the dead actor and fails; /healthz says so until a cycle succeeds.
                _wait(lambda: _health(port) == 503, timeout=30, every=0.02)
            for i in range(4):
                dev.call(dev.cluster.create, "", "v1", "pods", pod(f"after-{i}", queue_name="team"), "default")
            _wait(lambda: all(bound(f"after-{i}") for i in range(4)), timeout=120)
            _wait(lambda: _health(port) == 200 and _health(port, "readyz") == 200, timeout=30)
            assert len(_actor_processes(scheduler.pid)) == 2  # the dead one was replaced
            assert scheduler.poll() is None  # and the scheduler never stopped
        finally:
            scheduler.terminate()
            try:
                scheduler.wait(timeout=30)
            except subprocess.TimeoutExpired:
                scheduler.kill()
                scheduler.wait()


def test_pods_keep_binding_after_a_shard_actor_process_is_killed(tmp_path: Path) -> None:
    _kill_and_keep_binding(tmp_path, coordinator=False)


def test_pods_keep_binding_after_the_coordinator_actor_process_is_killed(tmp_path: Path) -> None:
    _kill_and_keep_binding(tmp_path, coordinator=True)
