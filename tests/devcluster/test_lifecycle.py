"""The dev cluster for synchronous callers: the background thread and the CLI."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import yaml

from devcluster import DevCluster, DevClusterThread
from kai_ray.app.sim.cluster import synthetic_nodes
from tests.devcluster.conftest import pod

REPO = Path(__file__).resolve().parents[2]


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def test_a_cluster_in_a_background_thread(tmp_path: Path) -> None:
    with DevClusterThread(nodes=synthetic_nodes(2), start_delay=0) as dev:
        assert [n["metadata"]["name"] for n in get(f"{dev.url}/api/v1/nodes")["items"]] == [
            "kwok-node-0",
            "kwok-node-1",
        ]
        created = dev.call(dev.cluster.create, "", "v1", "pods", pod("a", node="kwok-node-0"), "default")
        assert created["metadata"]["uid"]
        assert dev.call(dev.cluster.drop_watches) == 0
        config = yaml.safe_load(dev.write_kubeconfig(tmp_path / "kc").read_text())
        assert config["clusters"][0]["cluster"]["server"] == dev.url
        assert config["current-context"] == "kai-ray-dev" and config["users"][0]["user"] == {}
    # Stopped: the port no longer answers.
    try:
        get(f"{dev.url}/version")
        raise AssertionError("the server still answers after stop")
    except OSError:
        pass


def test_a_kubeconfig_needs_a_started_cluster(tmp_path: Path) -> None:
    try:
        DevCluster().write_kubeconfig(tmp_path / "kc")
        raise AssertionError("wrote a kubeconfig without a server address")
    except RuntimeError:
        pass


def test_kai_ray_dev_cluster_serves_until_interrupted(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "dev.kubeconfig"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kai_ray",
            "dev-cluster",
            "--port",
            "0",
            "--nodes",
            "3",
            "--taint-nodes",
            "--kubeconfig-out",
            str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert f"export KUBECONFIG={kubeconfig}" in line
        url = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert url is not None
        nodes = get(f"{url.group(0)}/api/v1/nodes")["items"]
        assert len(nodes) == 3 and nodes[0]["spec"]["taints"][0]["key"] == "kwok.x-k8s.io/node"
        assert yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"] == url.group(0)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
