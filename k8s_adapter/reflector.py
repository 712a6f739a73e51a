"""List + watch for one kind, kept going forever (the informer pattern, written for our needs).

1. List with paging and remember the list's resourceVersion; hand each page to the page sink as it
   comes (so a large list is read while the rest is still on its way), the full set to the list sink.
2. Watch from that version with bookmarks; every event goes to the sink; the version moves.
3. The server ends the stream (timeoutSeconds) -> watch again from the last version.
   410 Gone (version too old) -> list again. Other failures -> back off, then list again.

Each watch is also wrapped in an outer timeout, because kubernetes-asyncio watches can hang
(kubernetes-asyncio issue #360). Events older than what the sink already holds are the sink's to drop.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from k8s_adapter.api import JSON, KubeApi, KubeError
from k8s_adapter.kinds import Kind

log = logging.getLogger(__name__)

IDLE_REWATCH_DELAY = 0.05  # seconds before re-watching after a stream that brought no events

ListSink = Callable[[Kind, list[JSON]], None]
EventSink = Callable[[Kind, str, JSON], None]


@dataclass(slots=True)
class ReflectorStats:
    lists: int = 0
    watches: int = 0
    events: int = 0
    gone: int = 0
    errors: int = 0
    list_seconds: float = 0.0  # the last list, all its pages
    synced: asyncio.Event = field(default_factory=asyncio.Event)


class Reflector:
    def __init__(
        self,
        api: KubeApi,
        kind: Kind,
        on_list: ListSink,
        on_event: EventSink,
        watch_seconds: int = 300,
        page_size: int = 500,
        max_backoff: float = 30.0,
        on_page: ListSink | None = None,
    ) -> None:
        self.api = api
        self.kind = kind
        self.on_list = on_list
        self.on_event = on_event
        self.on_page = on_page  # each page of a list but the last, as it comes (the list follows whole)
        self.watch_seconds = watch_seconds
        self.page_size = page_size
        self.max_backoff = max_backoff
        self.stats = ReflectorStats()
        self._stopping = False

    def stop(self) -> None:
        self._stopping = True

    async def run(self) -> None:
        backoff = 0.2
        while not self._stopping:
            try:
                version = await self._list()
                backoff = 0.2
                idle_backoff = IDLE_REWATCH_DELAY
                while not self._stopping:
                    events_before, started = self.stats.events, time.monotonic()
                    version = await self._watch(version)
                    if self.stats.events == events_before and time.monotonic() - started < 1.0:
                        # A stream that ends at once with nothing in it, again and again, must not
                        # become a busy loop of requests: wait a little longer each time.
                        await asyncio.sleep(idle_backoff)
                        idle_backoff = min(self.max_backoff, idle_backoff * 2)
                    else:
                        idle_backoff = IDLE_REWATCH_DELAY
            except _Gone:
                self.stats.gone += 1
                log.info("%s: watch version expired, listing again", self.kind.plural)
            except KubeError as exc:
                self.stats.errors += 1
                log.warning("%s: %s; retrying in %.1fs", self.kind.plural, exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(self.max_backoff, backoff * 2)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug must not stop the informer; it is logged and counted
                self.stats.errors += 1
                log.exception("%s: unexpected error in the reflector", self.kind.plural)
                await asyncio.sleep(backoff)
                backoff = min(self.max_backoff, backoff * 2)

    async def _list(self) -> str:
        items: list[JSON] = []
        token: str | None = None
        version = ""
        started = time.monotonic()
        while True:
            reply = await self.api.request("GET", self.kind.collection(), {"limit": self.page_size, "continue": token})
            page = reply.body.get("items") or []
            items.extend(page)
            meta = reply.body.get("metadata") or {}
            version = str(meta.get("resourceVersion") or version)
            token = meta.get("continue") or None
            if not token:
                break
            if self.on_page is not None:
                self.on_page(self.kind, page)
        self.stats.lists += 1
        self.stats.list_seconds = time.monotonic() - started
        self.on_list(self.kind, items)
        self.stats.synced.set()
        return version

    async def _watch(self, version: str) -> str:
        self.stats.watches += 1
        timeout = self.watch_seconds + random.randint(0, max(1, self.watch_seconds // 10))
        query = {"watch": True, "resourceVersion": version, "allowWatchBookmarks": True, "timeoutSeconds": timeout}
        try:
            async with asyncio.timeout(timeout + 30):
                async for event in self.api.stream(self.kind.collection(), query, timeout + 15):
                    version = self._handle(event, version)
        except TimeoutError:
            log.info("%s: watch outlived its timeout; starting a new one", self.kind.plural)
        except KubeError as exc:
            if exc.status == 410:
                raise _Gone() from exc
            raise
        return version

    def _handle(self, event: JSON, version: str) -> str:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Gone()
            raise KubeError(int(obj.get("code") or 0), str(obj.get("message") or "watch error"), obj)
        new_version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
        if kind == "BOOKMARK":
            return new_version
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self.stats.events += 1
            self.on_event(self.kind, str(kind), obj)
        return new_version


class _Gone(Exception):
    """The watch's resourceVersion is too old (410): list again."""
