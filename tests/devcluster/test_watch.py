"""Watches through kubernetes-asyncio: continuity, resuming, 410, bookmarks, timeouts, drops, selectors."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable
from typing import TypeVar

import aiohttp
import orjson
import pytest
from kubernetes_asyncio.client import ApiException
from kubernetes_asyncio.watch import Watch

from k8s_adapter.api import KubeApi, connect
from k8s_adapter.kinds import PODS
from k8s_adapter.reflector import Reflector
from tests.devcluster.conftest import ON_TEST_LOOP, Kube, eventually, pod, pod_group

pytestmark = ON_TEST_LOOP
Event = tuple[str, str, int]  # (type, pod name, resourceVersion)
T = TypeVar("T")


async def watch_events(kube: Kube, count: int, timeout: float = 3, **kwargs: object) -> list[Event]:
    """Up to ``count`` pod events (bookmarks skipped) from a watch on namespace default."""
    out: list[Event] = []
    async with Watch() as watch:
        async for event in watch.stream(kube.core.list_namespaced_pod, "default", timeout_seconds=timeout, **kwargs):
            if event["type"] == "BOOKMARK":
                continue
            meta = event["raw_object"]["metadata"]
            out.append((event["type"], meta["name"], int(meta["resourceVersion"])))
            if len(out) >= count:
                break
    return out


async def churn(kube: Kube, rng: random.Random, steps: int, names: list[str]) -> list[Event]:
    """Random creates, label patches and deletes of pods; returns the events a watcher must see."""
    expected: list[Event] = []
    for _ in range(steps):
        name = rng.choice(names)
        live = kube.cluster.get("", "v1", "pods", name, "default")
        if live is None:
            made = await kube.core.create_namespaced_pod("default", pod(name))
            expected.append(("ADDED", name, int(made.metadata.resource_version)))
        elif rng.random() < 0.6:
            patched = await kube.core.patch_namespaced_pod(
                name, "default", {"metadata": {"labels": {"n": str(rng.random())}}}
            )
            expected.append(("MODIFIED", name, int(patched.metadata.resource_version)))
        else:
            await kube.core.delete_namespaced_pod(name, "default")  # unbound: gone at once
            expected.append(("DELETED", name, kube.cluster.resource_version))
    return expected


async def test_list_then_watch_sees_every_change_in_order(kube: Kube) -> None:
    listed = await kube.core.list_namespaced_pod("default")
    expected = await churn(kube, random.Random(1), 30, ["a", "b", "c", "d"])
    seen = await watch_events(kube, len(expected), resource_version=listed.metadata.resource_version)
    assert seen == expected
    await eventually(lambda: kube.cluster.store.watcher_count() == 0)  # the client left: the server let go


async def test_watch_resumes_from_a_version_without_losing_or_repeating_events(kube: Kube) -> None:
    rng = random.Random(7)
    version = (await kube.core.list_namespaced_pod("default")).metadata.resource_version
    expected: list[Event] = []
    seen: list[Event] = []
    for _ in range(6):
        expected += await churn(kube, rng, 8, ["a", "b", "c", "d", "e"])
        missing = len(expected) - len(seen)
        chunk = await watch_events(kube, rng.randint(1, missing), resource_version=version)  # stop part way
        seen += chunk
        version = str(chunk[-1][2])
    seen += await watch_events(kube, len(expected) - len(seen), resource_version=version)
    assert seen == expected


async def test_watch_without_a_version_starts_with_the_current_objects(kube: Kube) -> None:
    await kube.core.create_namespaced_pod("default", pod("a"))
    await kube.core.create_namespaced_pod("default", pod("b"))
    task = asyncio.create_task(watch_events(kube, 3))
    await asyncio.sleep(0.2)
    await kube.core.create_namespaced_pod("default", pod("c"))
    assert [(t, n) for t, n, _ in await task] == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c")]


async def test_a_version_older_than_the_history_is_410(kube: Kube) -> None:
    old = (await kube.core.create_namespaced_pod("default", pod("a"))).metadata.resource_version
    await kube.core.create_namespaced_pod("default", pod("b"))
    kube.cluster.expire_history()
    with pytest.raises(ApiException) as caught:
        await watch_events(kube, 1, resource_version=old)
    assert caught.value.status == 410
    # The real watch cache answers 200 and an ERROR event, which is what the adapter's reflector reads.
    status, lines = await raw_watch(kube, f"resourceVersion={old}&timeoutSeconds=2")
    assert status == 200 and lines[0]["type"] == "ERROR"
    assert lines[0]["object"]["code"] == 410 and lines[0]["object"]["reason"] == "Expired"
    # From the current version all is well again.
    fresh = str(kube.cluster.resource_version)
    task = asyncio.create_task(watch_events(kube, 1, resource_version=fresh))
    await asyncio.sleep(0.1)
    await kube.core.create_namespaced_pod("default", pod("c"))
    assert [(t, n) for t, n, _ in await task] == [("ADDED", "c")]


async def test_watching_forever_retries_410_once_then_raises(kube: Kube) -> None:
    old = (await kube.core.create_namespaced_pod("default", pod("a"))).metadata.resource_version
    await kube.core.create_namespaced_pod("default", pod("b"))  # a change the watch would miss
    kube.cluster.expire_history()
    with pytest.raises(ApiException) as caught:
        async with Watch() as watch:
            async for _ in watch.stream(kube.core.list_namespaced_pod, "default", resource_version=old):
                pass
    assert caught.value.status == 410


async def test_the_history_is_bounded_per_kind() -> None:
    from devcluster import DevCluster

    cluster = DevCluster(history=5, simulate=False)
    store, pods = cluster.store, cluster.resource("", "v1", "pods")
    start = cluster.resource_version
    for i in range(8):
        cluster.create("", "v1", "pods", pod(f"p{i}"), "default")
    for version, ok in ((start, False), (start + 2, False), (start + 3, True), (cluster.resource_version, True)):
        probe = Probe()
        try:
            store.watch(pods, probe, version)
        except Exception as exc:  # noqa: BLE001 - the 410 is what is being checked
            assert not ok and getattr(exc, "code", None) == 410
        else:
            assert ok and len(probe.changes) == cluster.resource_version - version
            store.unwatch(pods, probe)


class Probe:
    namespace = None

    def __init__(self) -> None:
        self.changes: list[object] = []

    def deliver(self, change: object) -> None:
        self.changes.append(change)

    def close(self, abrupt: bool = False) -> None:
        pass


async def raw_watch(
    kube: Kube, query: str, path: str = "/api/v1/namespaces/default/pods", limit: int = 100
) -> tuple[int, list[dict]]:
    """A watch read line by line over plain aiohttp, until the server ends it or ``limit`` lines."""
    lines: list[dict] = []
    async with aiohttp.ClientSession() as session, session.get(f"{kube.cluster.url}{path}?watch=true&{query}") as r:
        async for line in r.content:
            if line.strip():
                lines.append(orjson.loads(line))
            if len(lines) >= limit:
                break
        return r.status, lines


async def test_bookmarks_when_allowed_and_timeout_seconds_end_streams(kube: Kube) -> None:
    await kube.core.create_namespaced_pod("default", pod("a"))
    version = kube.cluster.resource_version
    loop = asyncio.get_running_loop()

    async def timed(work: Awaitable[T]) -> tuple[float, T]:
        started = loop.time()
        outcome = await work
        return loop.time() - started, outcome

    (t1, (_, marked)), (t2, (_, plain)), (t3, events) = await asyncio.gather(  # all three run for 1 s together
        timed(raw_watch(kube, f"resourceVersion={version}&allowWatchBookmarks=true&timeoutSeconds=1")),
        timed(raw_watch(kube, f"resourceVersion={version}&timeoutSeconds=1")),
        timed(watch_events(kube, 1, timeout=1, resource_version=str(version))),
    )
    bookmarks = [e for e in marked if e["type"] == "BOOKMARK"]
    assert len(bookmarks) >= 2 and len(bookmarks) == len(marked)  # every 0.3 s in this fixture, nothing else
    assert bookmarks[0]["object"]["metadata"]["resourceVersion"] == str(version)
    assert bookmarks[0]["object"]["kind"] == "Pod"
    assert plain == [] and events == []
    assert all(0.9 <= t < 2.5 for t in (t1, t2, t3))


async def test_a_watch_sees_objects_enter_and_leave_its_selection(kube: Kube) -> None:
    version = str(kube.cluster.resource_version)
    task = asyncio.create_task(watch_events(kube, 4, resource_version=version, field_selector="spec.nodeName="))
    labelled = asyncio.create_task(watch_events(kube, 3, resource_version=version, label_selector="app=x"))
    await asyncio.sleep(0.1)
    created = await kube.core.create_namespaced_pod("default", pod("a", labels={"app": "x"}))
    await kube.core.patch_namespaced_pod("a", "default", {"metadata": {"labels": {"app": "y"}}})
    await kube.core.patch_namespaced_pod("a", "default", {"metadata": {"labels": {"app": "x"}}})
    await bind(kube, "a", "kwok-node-0", created.metadata.uid)
    unbound = await task
    assert [t for t, _, _ in unbound] == ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]  # binding leaves spec.nodeName=
    assert [v for _, _, v in unbound] == sorted(v for _, _, v in unbound)
    assert [t for t, _, _ in await labelled] == ["ADDED", "DELETED", "ADDED"]


async def bind(kube: Kube, name: str, node: str, uid: str | None = None) -> int:
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, **({"uid": uid} if uid else {})},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    response = await kube.core.create_namespaced_pod_binding(name, "default", body, _preload_content=False)
    return int(response.status)


async def test_dropped_watches_break_or_end_and_resume_loses_nothing(kube: Kube) -> None:
    version = str(kube.cluster.resource_version)
    seen: list[Event] = []

    async def follow() -> None:
        async with Watch() as watch:
            async for event in watch.stream(
                kube.core.list_namespaced_pod, "default", resource_version=version, timeout_seconds=5
            ):
                meta = event["raw_object"]["metadata"]
                seen.append((event["type"], meta["name"], int(meta["resourceVersion"])))

    task = asyncio.create_task(follow())
    await kube.core.create_namespaced_pod("default", pod("a"))
    await eventually(lambda: len(seen) == 1)
    assert kube.cluster.drop_watches() == 1  # abrupt: the connection is cut mid-stream
    with pytest.raises(aiohttp.ClientError):
        await task
    await kube.core.create_namespaced_pod("default", pod("b"))  # while nobody watches
    version = str(seen[-1][2])
    task = asyncio.create_task(follow())
    await eventually(lambda: len(seen) == 2)
    assert kube.cluster.drop_watches(abrupt=False) == 1  # clean: the stream simply ends
    await asyncio.wait_for(task, 2)
    assert [(t, n) for t, n, _ in seen] == [("ADDED", "a"), ("ADDED", "b")]
    assert kube.cluster.store.watcher_count() == 0


async def test_send_initial_events_ends_with_a_marked_bookmark(kube: Kube) -> None:
    await kube.core.create_namespaced_pod("default", pod("a"))
    _, lines = await raw_watch(
        kube,
        "sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1",
        limit=2,
    )
    assert [e["type"] for e in lines] == ["ADDED", "BOOKMARK"]
    assert lines[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_custom_resources_watch_across_namespaces(kube: Kube) -> None:
    await kube.core.create_namespace({"metadata": {"name": "team"}})
    version = str(kube.cluster.resource_version)
    events = []

    async def follow() -> None:
        async with Watch() as watch:
            async for event in watch.stream(
                kube.custom.list_cluster_custom_object,
                "scheduling.run.ai",
                "v2alpha2",
                "podgroups",
                resource_version=version,
                timeout_seconds=3,
            ):
                events.append((event["type"], event["object"]["metadata"]["namespace"]))
                if len(events) == 2:
                    return

    task = asyncio.create_task(follow())
    for ns in ("default", "team"):
        await kube.custom.create_namespaced_custom_object(
            "scheduling.run.ai", "v2alpha2", ns, "podgroups", pod_group("pg", "q")
        )
    await task
    assert events == [("ADDED", "default"), ("ADDED", "team")]


async def test_the_adapters_reflector_relists_after_410(kube: Kube) -> None:
    api: KubeApi = await connect(str(kube.kubeconfig))
    state: dict[str, dict] = {}
    lists = []

    def on_list(_: object, items: list[dict]) -> None:
        lists.append(len(items))
        state.clear()
        state.update({i["metadata"]["name"]: i for i in items})

    def on_event(_: object, kind: str, obj: dict) -> None:
        if kind == "DELETED":
            state.pop(obj["metadata"]["name"], None)
        else:
            state[obj["metadata"]["name"]] = obj

    reflector = Reflector(api, PODS, on_list, on_event, watch_seconds=2)
    task = asyncio.create_task(reflector.run())
    try:
        await kube.core.create_namespaced_pod("default", pod("a"))
        await eventually(lambda: "a" in state)
        # The reflector's next watch is held up while changes happen and the history is forgotten, so it
        # asks for a version that is now too old and must list again.
        kube.cluster.faults.delay(0.5, "watch", "pods", times=1)
        kube.cluster.drop_watches(abrupt=False)
        await kube.core.create_namespaced_pod("default", pod("b"))
        await kube.core.delete_namespaced_pod("a", "default")
        kube.cluster.expire_history()
        await eventually(lambda: set(state) == {"b"} and reflector.stats.gone == 1)
        assert len(lists) >= 2
    finally:
        reflector.stop()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()
