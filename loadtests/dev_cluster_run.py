"""The dev cluster in a process of its own and kai-ray's scheduler loop against it, for load runs.

The API server runs apart (as a real one would); the scheduler loop and the load driver share
this process, each with its own client.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO

from prometheus_client import CollectorRegistry

from k8s_adapter.api import KubeApi, connect
from k8s_adapter.cache import ClusterCache
from k8s_adapter.leader import Leadership
from k8s_adapter.runner import CoordinatorLike, SchedulerLoop


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@asynccontextmanager
async def dev_cluster(nodes: int) -> AsyncIterator[str]:
    """`kai-ray dev-cluster` with ``nodes`` synthetic nodes; yields its kubeconfig's path."""
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = str(Path(tmp) / "kubeconfig")
        server = subprocess.Popen(
            [sys.executable, "-m", "kai_ray", "dev-cluster", "--port", str(_free_port()), "--nodes", str(nodes)]
            + ["--kubeconfig-out", kubeconfig],
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stderr is not None
            first = server.stderr.readline()  # "dev cluster at ..." once it serves
            if not first.startswith("dev cluster at"):
                raise RuntimeError(f"the dev cluster did not start: {first.strip() or 'no output'}")
            # Drained for the whole run: a pipe nobody reads fills after 64 KiB of warnings and
            # then stops the dev cluster at its next log line, and the run with it.
            tail = _drain(server.stderr)
            yield kubeconfig
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=30)
        if server.returncode not in (0, -signal.SIGINT):
            print(f"the dev cluster exited with {server.returncode}; its last lines:", *tail, sep="\n", file=sys.stderr)


def _drain(stream: IO[str], keep: int = 20) -> deque[str]:
    """Read ``stream`` to its end on a thread of its own; returns its last ``keep`` lines so far."""
    tail: deque[str] = deque(maxlen=keep)
    threading.Thread(target=lambda: tail.extend(line.rstrip() for line in stream), daemon=True).start()
    return tail


@asynccontextmanager
async def scheduling(
    kubeconfig: str, scheduler_name: str, make: Callable[[int], CoordinatorLike], period: float
) -> AsyncIterator[tuple[KubeApi, CollectorRegistry]]:
    """The scheduler loop running against the cluster until the block ends; yields a client of
    its own for the load driver, and the loop's metrics."""
    scheduler_api, driver_api = await connect(kubeconfig), await connect(kubeconfig)
    registry = CollectorRegistry()
    loop = SchedulerLoop(
        scheduler_api, ClusterCache(scheduler_name), make, registry, Leadership(enabled=False), period=period
    )
    scheduler = asyncio.create_task(loop.run())
    try:
        yield driver_api, registry
    finally:
        loop.stop()
        await asyncio.wait_for(scheduler, 30)
        await scheduler_api.close()
        await driver_api.close()
