"""Watch streams: newline-delimited JSON events from the store to one HTTP client.

A ``Watcher`` receives every change of its table (store.Table.record) and decides what this
client sees, as the real API server's cacher does for a selector:
- both the old and the new object match: MODIFIED;
- only the new one matches: ADDED;
- only the old one matches: DELETED, carrying the old object at the change's version (so a
  watch on ``spec.nodeName=`` sees a pod leave when it is bound).
Encoded lines are cached on the change, so a thousand watchers of one event cost one
serialisation. ``serve`` writes the queued lines, BOOKMARK events when asked for, and ends the
stream at ``timeoutSeconds``; a dropped watcher ends it cleanly or cuts the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from devcluster.catalog import ResourceType
from devcluster.selectors import Predicate, everything
from devcluster.store import Change

Obj = dict[str, Any]
Render = Callable[[str, Obj], bytes]  # (event type, object) -> one encoded line
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def encode(kind: str, obj: Obj) -> bytes:
    return orjson.dumps({"type": kind, "object": obj}) + b"\n"


class Watcher:
    def __init__(
        self,
        rt: ResourceType,
        namespace: str | None,
        predicate: Predicate = everything,
        render: Render | None = None,
        max_pending: int = 200_000,
    ) -> None:
        self.rt = rt
        self.namespace = namespace
        self.predicate = predicate
        self.render = render  # set for clients that asked for Table rows instead of objects
        self.max_pending = max_pending
        self.pending: deque[bytes] = deque()
        self.wake = asyncio.Event()
        self.closed = False
        self.abrupt = False

    def deliver(self, change: Change) -> None:
        if self.closed:
            return
        obj, kind = change.obj, change.type
        if self.predicate is not everything:
            now = self.predicate(obj)
            before = change.prev is not None and kind == "MODIFIED" and self.predicate(change.prev)
            if kind == "MODIFIED" and not now:
                if not before:
                    return
                assert change.prev is not None
                kind, obj = "DELETED", change.prev  # left the selection: gone, as far as this watch knows
            elif kind == "MODIFIED" and not before:
                kind = "ADDED"
            elif not now:
                return
        self._push(self._line(change, kind, obj))

    def _line(self, change: Change, kind: str, obj: Obj) -> bytes:
        left = obj is change.prev and change.type == "MODIFIED"
        if left:
            obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(change.rv)}}
        if self.rt.custom and obj.get("apiVersion") != self.rt.api_version:
            obj = {**obj, "apiVersion": self.rt.api_version}  # served under another version of the CRD
        if self.render is not None:
            return self.render(kind, obj)
        key = (kind + ("-left" if left else ""), self.rt.api_version)
        line = change.lines.get(key)
        if line is None:
            line = change.lines[key] = encode(kind, obj)
        return line

    def send(self, kind: str, obj: Obj) -> None:
        """Queue one event that is not a stored change (initial state, bookmarks)."""
        if not self.closed:
            self._push(self.render(kind, obj) if self.render is not None and kind != "BOOKMARK" else encode(kind, obj))

    def bookmark(self, version: int, initial_end: bool = False) -> None:
        meta: Obj = {"resourceVersion": str(version)}
        if initial_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        self.send("BOOKMARK", {"kind": self.rt.kind, "apiVersion": self.rt.api_version, "metadata": meta})

    def _push(self, line: bytes) -> None:
        self.pending.append(line)
        if len(self.pending) > self.max_pending:  # a client this far behind is cut off, as the real server does
            self.close()
        self.wake.set()

    def close(self, abrupt: bool = False) -> None:
        self.closed = True
        self.abrupt = self.abrupt or abrupt
        self.wake.set()


async def serve(
    request: web.Request,
    watcher: Watcher,
    *,
    timeout: float,
    bookmark_interval: float | None,
    version: Callable[[], int],
) -> web.StreamResponse:
    """Stream ``watcher``'s events until the timeout, a drop, or the client going away."""
    loop = asyncio.get_running_loop()
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    with contextlib.suppress(ConnectionResetError):  # the client went away; the caller unregisters the watcher
        await _pump(request, response, watcher, loop.time() + timeout, bookmark_interval, version)
    return response


async def _pump(
    request: web.Request,
    response: web.StreamResponse,
    watcher: Watcher,
    deadline: float,
    bookmark_interval: float | None,
    version: Callable[[], int],
) -> None:
    loop = asyncio.get_running_loop()
    next_bookmark = loop.time() + bookmark_interval if bookmark_interval else None
    while True:
        if watcher.abrupt:
            _cut(request)
            return
        if watcher.pending:
            batch = b"".join(watcher.pending)
            watcher.pending.clear()
            await response.write(batch)
            continue
        if watcher.closed:
            break
        now = loop.time()
        if now >= deadline:
            break
        if next_bookmark is not None and now >= next_bookmark:
            # Every change up to version() is already written: the queue is empty and we are on the loop.
            watcher.bookmark(version())
            next_bookmark = now + (bookmark_interval or 0)
            continue
        if request.transport is None or request.transport.is_closing():
            break
        wait = min(deadline, next_bookmark or deadline) - now
        watcher.wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(watcher.wake.wait(), min(wait, 5.0))  # wake now and then to notice a gone client
    await response.write_eof()


def _cut(request: web.Request) -> None:
    """Close the connection without ending the chunked body: the client sees a broken stream."""
    if request.transport is not None:
        request.transport.close()
