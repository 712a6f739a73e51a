"""Watches started before the cache exists: what they bring meanwhile reaches the cache, in order."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from k8s_adapter.api import JSON, Response
from k8s_adapter.cache import ClusterCache
from k8s_adapter.kinds import NODES, PODS, Kind
from k8s_adapter.watches import Watches
from tests.adapter.fake_api import FakeApi, ok
from tests.adapter.test_cache_reflector import node, pod


def lists(method: str, path: str, query: Mapping[str, Any] | None, body: Any) -> Response:
    """Two pages of pods, one of nodes; every other kind lists empty (discovery serves none)."""
    if path == PODS.collection():
        if (query or {}).get("continue") is None:
            return ok({"items": [pod("p1", 10)], "metadata": {"continue": "next", "resourceVersion": "20"}})
        return ok({"items": [pod("p2", 11)], "metadata": {"resourceVersion": "20"}})
    if path == NODES.collection():
        return ok({"items": [node("n1", 5)], "metadata": {"resourceVersion": "20"}})
    if path.endswith(("v1beta1", "v1alpha3", "v1alpha2")):
        return ok({"resources": []})
    return ok({"items": [], "metadata": {"resourceVersion": "20"}})


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, list[str]]] = []

    def on_list(self, kind: Kind, items: list[JSON]) -> None:
        self.calls.append(("list", kind.plural, [i["metadata"]["name"] for i in items]))

    def on_page(self, kind: Kind, items: list[JSON]) -> None:
        self.calls.append(("page", kind.plural, [i["metadata"]["name"] for i in items]))

    def on_event(self, kind: Kind, event: str, obj: JSON) -> None:
        self.calls.append((event, kind.plural, [obj["metadata"]["name"]]))


async def synced(watches: Watches) -> None:
    async with asyncio.timeout(5):
        await asyncio.gather(*(r.stats.synced.wait() for r in watches.reflectors))


async def test_what_came_before_the_sink_existed_reaches_it_in_order_then_calls_go_straight_through() -> None:
    api = FakeApi(lists)
    api.streams = [[{"type": "ADDED", "object": node("n2", 21)}]]  # the first watch to open brings a node
    watches = Watches(api)  # type: ignore[arg-type]
    watches.start()
    try:
        await synced(watches)
        await asyncio.sleep(0.1)  # the watches open after their lists
        assert watches.held > 0
        recorder = Recorder()
        watches.attach(recorder)
        pods = [c for c in recorder.calls if c[1] == "pods"]
        assert pods == [("page", "pods", ["p1"]), ("list", "pods", ["p1", "p2"])]
        assert ("list", "nodes", ["n1"]) in recorder.calls
        assert watches.held == 0
        watches.reflectors[0].on_event(NODES, "MODIFIED", node("n1", 30))  # after attach: straight through
        assert recorder.calls[-1] == ("MODIFIED", "nodes", ["n1"])
    finally:
        await watches.close()
    assert all(task.done() for task in watches._tasks)


async def test_a_cache_attached_late_ends_with_what_an_attached_one_would_hold() -> None:
    early, late = ClusterCache(), ClusterCache()
    for cache, attach_first in ((early, True), (late, False)):
        watches = Watches(FakeApi(lists))  # type: ignore[arg-type]
        if attach_first:
            watches.attach(cache)
        watches.start()
        try:
            await synced(watches)
        finally:
            await watches.close()
        if not attach_first:
            watches.attach(cache)
        cache.take_deltas()
    assert sorted(early.pods) == sorted(late.pods) == ["ns/p1", "ns/p2"]
    assert sorted(early.nodes) == sorted(late.nodes) == ["n1"]
