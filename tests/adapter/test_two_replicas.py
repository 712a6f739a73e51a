"""Two `kai-ray run` processes against one API server: exactly one binds, and when it dies
(killed, so it cannot hand the lease over) the other takes over within 15 s."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from devcluster import DevClusterThread
from kai_ray.app.sim.cluster import synthetic_nodes
from tests.adapter.conftest import pod, queue

REPO = Path(__file__).resolve().parents[2]
TAKEOVER_SECONDS = 15


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _binds(port: int) -> float:
    """kai_ray_binds_total{result="ok"} of the replica serving /metrics on ``port`` (-1 if it is down)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return -1.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "kai_ray_binds_total" and sample.labels.get("result") == "ok":
                return sample.value
    return 0.0


def _wait(check: Callable[[], bool], timeout: float) -> float:
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(0.1)
    return time.monotonic() - started


def test_one_replica_binds_and_the_other_takes_over_when_it_is_killed(tmp_path: Path) -> None:
    with DevClusterThread(nodes=synthetic_nodes(2), start_delay=0) as dev:
        kubeconfig = dev.write_kubeconfig(tmp_path / "kubeconfig")
        dev.call(dev.cluster.create, "scheduling.run.ai", "v2", "queues", queue("team"))
        ports = [_free_port(), _free_port()]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        replicas = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "kai_ray",
                    "run",
                    "--kubeconfig",
                    str(kubeconfig),
                    "--leader-elect",
                    "--metrics-port",
                    str(port),
                    "--period",
                    "0.2",
                    "--shards",
                    "0",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                cwd=REPO,
            )
            for port in ports
        ]

        def bound(name: str) -> bool:
            found = dev.call(dev.cluster.get, "", "v1", "pods", name, "default")
            return bool(found and found["spec"].get("nodeName"))

        try:
            dev.call(dev.cluster.create, "", "v1", "pods", pod("before", queue_name="team"), "default")
            _wait(lambda: bound("before"), timeout=60)  # start-up, election, first cycle
            _wait(lambda: sorted(_binds(p) for p in ports) == [0.0, 1.0], timeout=10)
            leader = [_binds(p) for p in ports].index(1.0)

            replicas[leader].kill()  # no clean shutdown: the lease has to run out
            replicas[leader].wait(timeout=10)
            dev.call(dev.cluster.create, "", "v1", "pods", pod("after", queue_name="team"), "default")
            took = _wait(lambda: bound("after"), timeout=TAKEOVER_SECONDS)
            assert took < TAKEOVER_SECONDS
            # The standby bound it, and nothing before; its counter moves once the bind call has
            # returned, a moment after the API server shows the pod bound.
            _wait(lambda: _binds(ports[1 - leader]) == 1.0, timeout=5)
        finally:
            for replica in replicas:
                if replica.poll() is None:
                    replica.terminate()
            for replica in replicas:
                try:
                    replica.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    replica.kill()


def test_a_cleanly_stopped_leader_hands_the_lease_over_at_once(tmp_path: Path) -> None:
    with DevClusterThread(nodes=synthetic_nodes(1), start_delay=0) as dev:
        kubeconfig = dev.write_kubeconfig(tmp_path / "kubeconfig")
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        leader = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kai_ray",
                "run",
                "--kubeconfig",
                str(kubeconfig),
                "--leader-elect",
                "--lease-duration",
                "30",
                "--metrics-port",
                str(_free_port()),
                "--shards",
                "0",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=REPO,
        )

        def holder() -> str:
            lease = dev.call(dev.cluster.get, "coordination.k8s.io", "v1", "leases", "kai-ray", "default")
            return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")

        try:
            _wait(lambda: bool(holder()), timeout=60)
            leader.terminate()
            assert leader.wait(timeout=15) == 0
            assert holder() == ""  # released, not left to run out its 30 s
        finally:
            if leader.poll() is None:
                leader.kill()
                leader.wait()
