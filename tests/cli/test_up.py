"""`kai-ray up` / `dev-cluster` / `run` as a user meets them: where the kubeconfig goes, KAI's
defaults in the cluster, and one line with exit 2 for what the user must fix."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from kai_ray import labels as L
from tests.cli.conftest import RunCli
from tests.conftest import REPO
from tests.helm.chart import find, render


def _cli(*args: str, env: dict[str, str] | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kai_ray", *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd
    )


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def test_up_keeps_its_kubeconfig_in_the_cache_and_creates_kais_queues_and_priority_classes(tmp_path: Path) -> None:
    work, cache = tmp_path / "checkout", tmp_path / "cache"
    work.mkdir()
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-m", "kai_ray", "up", "--port", "0", "--metrics-port", "0", "--nodes", "2"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=work,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        kubeconfig = Path(line.rsplit("KUBECONFIG=", 1)[1].strip())
        assert kubeconfig.parent == cache / "kai-ray" and kubeconfig.is_file()
        assert list(work.iterdir()) == []  # nothing lands in the working tree
        url = line.split()[3]
        queues = {q["metadata"]["name"]: q["spec"] for q in _get(f"{url}/apis/scheduling.run.ai/v2/queues")["items"]}
        assert queues[L.DEFAULT_QUEUE]["parentQueue"] == L.DEFAULT_PARENT_QUEUE
        classes = {
            c["metadata"]["name"]: c["value"] for c in _get(f"{url}/apis/scheduling.k8s.io/v1/priorityclasses")["items"]
        }
        assert {name: value for name, value, _ in L.KAI_PRIORITY_CLASSES}.items() <= classes.items()
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        assert not kubeconfig.exists()  # the server it named is gone
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_chart_and_up_install_the_same_priority_classes() -> None:
    chart = {c["metadata"]["name"]: c["value"] for c in find(render(), "PriorityClass")}
    assert chart == {name: value for name, value, _ in L.KAI_PRIORITY_CLASSES}


def test_a_busy_port_is_one_line_and_exit_2() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        for command in (["dev-cluster", "--port", port], ["up", "--port", port]):
            result = _cli(*command)
            assert result.returncode == 2
            assert result.stderr.splitlines() == [
                f"kai-ray: error: port {port} for the API server is already in use; "
                "choose another with --port (0 picks a free one)"
            ]
        started = time.monotonic()
        result = _cli("up", "--port", "0", "--metrics-port", port)
        assert result.returncode == 2 and time.monotonic() - started < 60
        assert result.stderr.splitlines()[-1].startswith(f"kai-ray: error: port {port} for /metrics is already in use")
        assert "Traceback" not in result.stderr


def test_run_outside_a_cluster_without_a_kubeconfig_is_one_line_and_exit_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    result = _cli("run", "--metrics-port", "0", env=env)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "kai-ray: error: no kubeconfig given (--kubeconfig or $KUBECONFIG) and not running in a cluster "
        "(Service host/port is not set)"
    ]
    missing = _cli("run", "--kubeconfig", str(tmp_path / "nope"), env=env)
    assert missing.returncode == 2 and missing.stderr.splitlines() == [
        f"kai-ray: error: {tmp_path / 'nope'}: no such kubeconfig file"
    ]


def test_a_usage_error_is_one_line_naming_the_help_and_exit_2(kai_ray: RunCli) -> None:
    for argv, message in (
        (["run", "--bogus"], "kai-ray: error: unrecognized arguments: --bogus (see kai-ray --help)"),
        (["up", "--log-format", "xml"], "kai-ray up: error: argument --log-format: invalid choice: 'xml'"),
        (["schedule"], "kai-ray schedule: error: the following arguments are required: --snapshot"),
        ([], "kai-ray: error: the following arguments are required: COMMAND"),
    ):
        result = kai_ray(*argv)
        assert result.code == 2 and result.out == ""
        [line] = result.error_lines
        assert line.startswith(message), line
