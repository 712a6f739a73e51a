"""How a step of the scheduler loop runs: behind its own error boundary, timed, in the loop's turn
or beside it, and the coordinator called one step at a time off the event loop.

A failure is logged (one line when expected: the API said no, the coordinator's actor died; with
its traceback when it is a bug), counted in ``kai_ray_loop_errors_total{step}``, and the loop
goes on: the next iteration retries.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from coordinator.failures import CoordinatorLost
from k8s_adapter.api import KubeError, describe
from k8s_adapter.coordinator_health import CoordinatorHealth
from k8s_adapter.loop_metrics import LoopMetrics

log = logging.getLogger("k8s_adapter.runner")  # the loop's own logger: its lines read as the loop's


class LoopSteps:
    def __init__(self, metrics: LoopMetrics, health: CoordinatorHealth) -> None:
        self.metrics = metrics
        self.health = health
        self.in_flight: set[asyncio.Task[None]] = set()  # steps running beside the loop
        self.coordinator_lock = asyncio.Lock()

    async def run(self, name: str, action: Callable[[], Awaitable[Any]]) -> None:
        started = time.perf_counter()
        try:
            await action()
        except asyncio.CancelledError:
            raise
        except CoordinatorLost as lost:  # its actor died: replaced (or not) already, one line
            self.metrics.failed(name)
            self.health.lost(lost, time.monotonic())
            self.metrics.coordinator_losses.labels(str(lost.replaced).lower()).inc()
            log.warning("scheduler loop step %s: %s", name, lost)
        except KubeError as exc:  # the API said no (a conflict, a timeout): expected, one line
            self.metrics.failed(name)
            log.warning("scheduler loop step %s failed: %s; retried next iteration", name, describe(exc))
        except Exception:  # one failing step must not stop scheduling; a bug, so with its traceback
            self.metrics.failed(name)
            log.exception("scheduler loop step %s failed", name)
        finally:
            self.metrics.step(name, time.perf_counter() - started)

    def background(self, name: str, action: Callable[[], Awaitable[Any]]) -> asyncio.Task[None]:
        """Run the step beside the loop; it is waited for (within a grace) when the loop stops."""
        task = asyncio.ensure_future(self.run(name, action))
        self.in_flight.add(task)
        task.add_done_callback(self.in_flight.discard)
        return task

    async def locked(self, method: Callable[..., Any], *args: Any) -> Any:
        """Coordinator calls one at a time, off the event loop (a cycle takes CPU)."""
        async with self.coordinator_lock:
            return await asyncio.to_thread(method, *args)

    async def drain(self, grace: float) -> None:
        """Let the steps beside the loop finish (binds in flight: their pods are already counted as
        placed); what is still going after ``grace`` is dropped before the client closes under it.
        Its pods stay unbound, and the next scheduler to start places them from what it lists."""
        if self.in_flight:
            await asyncio.wait(set(self.in_flight), timeout=grace)
        unfinished = [task for task in self.in_flight if not task.done()]
        for task in unfinished:
            task.cancel()
        if unfinished:
            log.info("stopping: %d API writes still going dropped", len(unfinished))
            await asyncio.gather(*unfinished, return_exceptions=True)
