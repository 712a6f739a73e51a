"""When the loop's next iteration is due: a period after the last began, or sooner once the watch
brings something a cycle acts on.

KAI runs a session every period (1 s) whatever happened. A pod that arrives just after a session
waits for the next, and a reclaim takes two of them (one to evict, one to bind onto the freed
GPUs): about two seconds for one pod. Here a pod of ours arriving unbound, a new PodGroup, or,
while pods wait, a placed pod leaving or ending, wakes the loop early. It still rests after a
wake at least as long as its last iteration took, so a stream of events costs at most half of
its time and a burst of arrivals is decided together.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from k8s_adapter.kinds import POD_GROUPS, PODS, Kind

MIN_REST = 0.05  # seconds after a wake before the iteration it calls


class Wakeup:
    def __init__(self, scheduler_name: str, stop: asyncio.Event) -> None:
        self.scheduler_name = scheduler_name
        self._stop = stop
        self._nudged = asyncio.Event()
        self.waiting = False  # the last cycle left pods pending or pipelined: freed capacity may place them

    def on_watch_event(self, kind: Kind, event: str, obj: dict[str, Any]) -> None:
        """A cache listener (event loop): nudge the loop for a change a cycle acts on."""
        if kind is POD_GROUPS:
            if event == "ADDED":
                self._nudged.set()
            return
        if kind is not PODS:
            return
        spec = obj.get("spec") or {}
        if not spec.get("nodeName"):
            if event == "ADDED" and spec.get("schedulerName") == self.scheduler_name:
                self._nudged.set()
        elif self.waiting and (event == "DELETED" or (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")):
            self._nudged.set()

    def nudge(self) -> None:
        self._nudged.set()

    def clear(self) -> None:
        """The changes so far are about to be taken: only later ones call for an early iteration."""
        self._nudged.clear()

    async def rest(self, wait: float, busy: float) -> None:
        """Until the next iteration: ``wait`` seconds, or, when nudged sooner, ``busy`` seconds (the
        last iteration's length, at least ``MIN_REST``) after the nudge if that is earlier. Returns
        at once on a stop."""
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancellation that
        # lands as its inner wait completes, and a cancelled loop must end.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await self._nudged.wait()
        rest = min(max(MIN_REST, busy), deadline - loop.time())
        if self._stop.is_set() or rest <= 0:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(rest):
                await self._stop.wait()
