"""Two kai-ray processes on one machine each run on a Ray instance of their own: neither joins
the other's, so neither loses its actors when the other ends and shuts its instance down."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO

# Starts Ray as kai-ray does, prints the instance's address, then (if told to) keeps an actor
# answering until its stdin closes.
PROCESS = """
import sys
import ray
from kai_ray.app.actors import ensure_ray

ensure_ray(num_cpus=1)
print(ray.get_runtime_context().gcs_address, flush=True)
if sys.argv[1] == "hold":
    @ray.remote(num_cpus=0)
    class Echo:
        def ping(self):
            return "pong"
    echo = Echo.remote()
    print(ray.get(echo.ping.remote()), flush=True)
    sys.stdin.read()  # until the test has run the second process
    print(ray.get(echo.ping.remote(), timeout=60), flush=True)
ray.shutdown()
"""


def test_a_second_kai_ray_starts_its_own_ray_instance_and_leaves_the_first_running() -> None:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # neither is told to join anything
    first = subprocess.Popen(
        [sys.executable, "-c", PROCESS, "hold"],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert first.stdout is not None and first.stdin is not None
        first_address = first.stdout.readline().strip()
        assert first.stdout.readline().strip() == "pong"
        second = subprocess.run(
            [sys.executable, "-c", PROCESS, "leave"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
        )
        assert second.returncode == 0, second.stderr[-2000:]
        assert second.stdout.strip() and second.stdout.strip() != first_address
        first.stdin.close()  # the second one has come and gone: the first one's actor still answers
        assert first.stdout.readline().strip() == "pong"
        assert first.wait(timeout=120) == 0
    finally:
        if first.poll() is None:
            first.kill()
