"""A reflector for a kind the API server may not serve: the Kubernetes Workload API's kinds
exist only where their feature gate is on. Before listing, API discovery says which of the
kind's versions (newest first) is served; none served, the reflector counts as synced at once,
watches nothing and says so once, so a cluster without the API runs as before. A restart picks
up an API turned on later."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from k8s_adapter.api import KubeApi, KubeError
from k8s_adapter.kinds import Kind
from k8s_adapter.reflector import EventSink, ListSink, Reflector

log = logging.getLogger(__name__)


async def served_kind(api: KubeApi, versions: tuple[Kind, ...]) -> Kind | None:
    """The first of ``versions`` (one resource, several versions of one group) that discovery
    lists, or None. A group or version the server does not know answers 404; a version it serves
    without the resource (its feature gate off) lists no such resource."""
    for kind in versions:
        try:
            reply = await api.request("GET", kind.api_prefix)
        except KubeError as exc:
            if exc.status == 404:
                continue
            raise
        if any(r.get("name") == kind.plural for r in reply.body.get("resources") or ()):
            return kind
    return None


class ServedReflector(Reflector):
    def __init__(
        self, api: KubeApi, versions: tuple[Kind, ...], on_list: ListSink, on_event: EventSink, **options: Any
    ):
        super().__init__(api, versions[0], on_list, on_event, **options)
        self.versions = versions
        self.served: bool | None = None  # None until discovery answered

    async def run(self) -> None:
        backoff = 0.2
        while not self._stopping:
            try:
                kind = await served_kind(self.api, self.versions)
                break
            except KubeError as exc:  # discovery failing now says nothing of the API: ask again
                self.stats.errors += 1
                log.warning("%s: discovery failed (%s); retrying in %.1fs", self.kind.plural, exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(self.max_backoff, backoff * 2)
        else:
            return
        if kind is None:
            self.served = False
            log.info(
                "%s.%s is not served (no %s): nothing of the Workload API to watch",
                self.kind.plural,
                self.kind.group,
                ", ".join(k.version for k in self.versions),
            )
            self.stats.synced.set()
            return
        self.kind, self.served = kind, True
        log.info("watching %s.%s/%s", kind.plural, kind.group, kind.version)
        await super().run()
