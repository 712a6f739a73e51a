"""Injected failures and delays, from Python and over HTTP, as clients see them."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from kubernetes_asyncio.client import ApiException
from kubernetes_asyncio.watch import Watch

from tests.devcluster.conftest import ON_TEST_LOOP, Kube, pod

pytestmark = ON_TEST_LOOP


@pytest.mark.parametrize(("code", "reason"), [(500, "InternalError"), (429, "TooManyRequests"), (409, "Conflict")])
async def test_the_next_n_matching_requests_fail_with_a_status(kube: Kube, code: int, reason: str) -> None:
    kube.cluster.faults.fail("create", "pods", code, times=2, message="chaos")
    for _ in range(2):
        with pytest.raises(ApiException) as caught:
            await kube.core.create_namespaced_pod("default", pod("a"))
        assert caught.value.status == code
        body = json.loads(caught.value.body)
        assert body == {
            **body,
            "kind": "Status",
            "status": "Failure",
            "code": code,
            "reason": reason,
            "message": "chaos",
        }
        if code == 429:
            assert caught.value.headers["Retry-After"] == "1"
    await kube.core.create_namespaced_pod("default", pod("a"))  # the rule is used up
    assert kube.cluster.faults.injected == 2 and kube.cluster.faults.rules == []


async def test_rules_match_verb_resource_subresource_and_name(kube: Kube) -> None:
    faults = kube.cluster.faults
    faults.fail("create", "pods", 500, subresource="binding", name="b")
    await kube.core.create_namespaced_pod("default", pod("a"))  # create of the pod itself: not matched
    await kube.core.create_namespaced_pod("default", pod("b"))
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "a"}, "target": {"name": "kwok-node-0"}}
    ok = await kube.core.create_namespaced_pod_binding("a", "default", body, _preload_content=False)
    assert ok.status == 201  # another pod's binding: not matched
    failed = await kube.core.create_namespaced_pod_binding(
        "b", "default", {**body, "metadata": {"name": "b"}}, _preload_content=False
    )
    assert failed.status == 500
    faults.fail("list", "pods", 503)
    await kube.core.read_namespaced_pod("a", "default")  # a get is not a list
    with pytest.raises(ApiException) as caught:
        await kube.core.list_namespaced_pod("default")
    assert caught.value.status == 503
    await kube.core.list_namespaced_pod("default")


async def test_a_failing_watch_and_an_injected_410(kube: Kube) -> None:
    kube.cluster.faults.fail("watch", "pods", 500)
    with pytest.raises(ApiException) as caught:
        async with Watch() as watch:
            async for _ in watch.stream(kube.core.list_namespaced_pod, "default", timeout_seconds=1):
                pass
    assert caught.value.status == 500
    kube.cluster.faults.fail("watch", "pods", 410)  # answered like the watch cache: an ERROR event
    with pytest.raises(ApiException) as caught:
        async with Watch() as watch:
            async for _ in watch.stream(kube.core.list_namespaced_pod, "default", timeout_seconds=1):
                pass
    assert caught.value.status == 410


async def test_latency_delays_matching_requests(kube: Kube) -> None:
    kube.cluster.faults.delay(0.6, "get", "pods")
    await kube.core.create_namespaced_pod("default", pod("a"))
    loop = asyncio.get_running_loop()
    started = loop.time()
    await kube.core.list_namespaced_pod("default")  # a list is not a get: not delayed
    assert loop.time() - started < 0.45
    started = loop.time()
    await kube.core.read_namespaced_pod("a", "default")
    assert loop.time() - started >= 0.6


async def test_faults_over_http(kube: Kube) -> None:
    url = f"{kube.cluster.url}/_devcluster/faults"
    async with aiohttp.ClientSession() as session:
        spec = {"fail": [{"verb": "update", "resource": "queues", "code": 409, "times": 1}]}
        async with session.post(url, json=spec) as r:
            assert r.status == 200 and (await r.json())["added"][0]["code"] == 409
        async with session.get(url) as r:
            assert [rule["verb"] for rule in (await r.json())["rules"]] == ["update"]
        async with session.post(url, json={"fail": [{"verb": "fly"}]}) as r:
            assert r.status == 400
        await kube.core.create_namespaced_pod("default", pod("a"))
        watching = asyncio.create_task(_count_events(kube))
        await asyncio.sleep(0.2)
        async with session.post(url, json={"dropWatches": True, "abrupt": False, "expireHistory": True}) as r:
            assert (await r.json())["droppedWatches"] == 1
        assert await watching == 1
        async with session.delete(url) as r:
            assert r.status == 200 and kube.cluster.faults.rules == []
        async with session.get(f"{kube.cluster.url}/_devcluster/stats") as r:
            assert int((await r.json())["resourceVersion"]) == kube.cluster.resource_version


async def _count_events(kube: Kube) -> int:
    seen = 0
    async with Watch() as watch:
        async for _ in watch.stream(kube.core.list_namespaced_pod, "default", timeout_seconds=5):
            seen += 1
    return seen
