"""Every watched kind's reflector, startable before the cache that reads them exists.

``kai-ray run`` starts its lists as soon as it has an API client, then imports the rest of the
scheduler (the model, the parsers, the coordinator: about a second of CPU) while the API server
encodes and sends them. Until ``attach``, lists, pages and events are held in arrival order;
``attach`` points the reflectors at the cache and hands it what was held, in that order, so the
cache sees exactly the calls it would have seen had it existed from the start.

This module imports only the client and the reflectors, so that importing it is cheap.
"""

from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import Protocol

from k8s_adapter.api import JSON, KubeApi
from k8s_adapter.kinds import DRA_WATCHED, WATCHED, WORKLOAD_API_WATCHED, Kind
from k8s_adapter.reflector import Reflector
from k8s_adapter.served_reflector import ServedReflector


class WatchSink(Protocol):
    def on_list(self, kind: Kind, items: list[JSON]) -> None: ...

    def on_page(self, kind: Kind, items: list[JSON]) -> None: ...

    def on_event(self, kind: Kind, event: str, obj: JSON) -> None: ...


# One held call: which sink method, and its arguments after the kind.
_Held = tuple[str, Kind, tuple[object, ...]]


class Watches:
    def __init__(self, api: KubeApi, dra: bool = False) -> None:
        self._held: list[_Held] = []
        lists, events, pages = (
            partial(self._hold, "on_list"),
            partial(self._hold, "on_event"),
            partial(self._hold, "on_page"),
        )
        kinds = WATCHED + (DRA_WATCHED if dra else ())
        self.reflectors: list[Reflector] = [Reflector(api, kind, lists, events, on_page=pages) for kind in kinds]
        self.reflectors += [
            ServedReflector(api, versions, lists, events, on_page=pages) for versions in WORKLOAD_API_WATCHED
        ]
        self._tasks: list[asyncio.Task[None]] = []
        self.started_at: float | None = None  # wall clock of start()

    @property
    def held(self) -> int:
        """Calls waiting for a sink (lists, pages and events alike)."""
        return len(self._held)

    def start(self) -> None:
        """Start every reflector (once; later calls do nothing). Needs a running event loop."""
        if not self._tasks:
            self.started_at = time.time()
            self._tasks = [asyncio.create_task(r.run(), name=f"watch-{r.kind.plural}") for r in self.reflectors]

    def attach(self, sink: WatchSink) -> None:
        """From now on ``sink`` takes every call, those held first, in the order they came."""
        for reflector in self.reflectors:  # nothing comes in between: this runs on the event loop
            reflector.on_list, reflector.on_event, reflector.on_page = sink.on_list, sink.on_event, sink.on_page
        held, self._held = self._held, []
        for method, kind, args in held:
            getattr(sink, method)(kind, *args)

    def stop(self) -> None:
        """Ask every reflector to end after its current request."""
        for reflector in self.reflectors:
            reflector.stop()

    async def close(self) -> None:
        """Stop the reflectors now (their requests cancelled) and wait until they have ended."""
        self.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _hold(self, method: str, kind: Kind, *args: object) -> None:
        self._held.append((method, kind, args))
