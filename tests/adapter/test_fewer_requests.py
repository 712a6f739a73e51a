"""Fewer API requests per bound pod, binds first: the client's request gate lets binds ahead of
status, events and PodGroups; a bare pod's bind carries its ``pod-group-name`` annotation, and
the pod grouper then creates its PodGroup with the group's clocks in it (one request where a
PodGroup, a pod PATCH and a clocks PATCH were three)."""

from __future__ import annotations

import asyncio
from typing import Any

from coordinator import JobClock
from k8s_adapter.api import KubeApi, RequestGate, urgent
from k8s_adapter.binder import Binder, BindRequest
from k8s_adapter.cache import ClusterCache
from k8s_adapter.job_clocks import JobClockWriter, rfc3339
from k8s_adapter.kinds import POD_GROUPS, PODS
from kai_ray import labels as L
from pod_grouper.live import PodGrouper
from tests.adapter.conftest import Env, pod, queue, running, until
from tests.adapter.fake_api import FakeApi, fail, ok

GROUPS = "/apis/scheduling.run.ai/v2alpha2/namespaces/default/podgroups"


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_freed_slot_goes_to_the_oldest_urgent_request_before_older_others() -> None:
    gate = RequestGate(1, others=1)
    await gate.acquire(False)
    order: list[str] = []

    async def take(name: str, is_urgent: bool) -> None:
        await gate.acquire(is_urgent)
        order.append(name)

    waiters = [asyncio.ensure_future(take("other-1", False)), asyncio.ensure_future(take("other-2", False))]
    await _settle()
    waiters += [asyncio.ensure_future(take("bind-1", True)), asyncio.ensure_future(take("bind-2", True))]
    await _settle()
    assert order == [] and gate.waiting() == 4
    for held in (False, True, True, False):  # each release is the holder's, urgent or not
        gate.release(held)
        await _settle()
    assert order == ["bind-1", "bind-2", "other-1", "other-2"]
    assert gate.open == 1 and gate.others_open == 1 and gate.waiting() == 0
    gate.release(False)
    assert gate.open == gate.others_open == 0
    await asyncio.gather(*waiters)


async def test_other_requests_keep_to_their_share_and_binds_use_the_rest() -> None:
    gate = RequestGate(4, others=2)
    for _ in range(2):
        await gate.acquire(False)
    third = asyncio.ensure_future(gate.acquire(False))
    await _settle()
    assert not third.done() and gate.open == 2  # the others' share is full: it waits
    binds = [asyncio.ensure_future(gate.acquire(True)) for _ in range(2)]
    await _settle()
    assert all(b.done() for b in binds) and gate.open == 4  # binds take the slots left
    gate.release(True)
    await _settle()
    assert not third.done()  # a bind's slot, but the others' share is still full
    gate.release(False)
    await _settle()
    assert third.done() and gate.others_open == 2 and gate.open == 3


async def test_a_waiter_cancelled_as_it_was_let_in_passes_the_slot_on() -> None:
    gate = RequestGate(1)
    await gate.acquire(False)
    first = asyncio.ensure_future(gate.acquire(False))
    second = asyncio.ensure_future(gate.acquire(True))
    await _settle()
    gate.release(False)  # the slot goes to ``second`` (urgent) ...
    second.cancel()  # ... which is cancelled before it runs: the slot must reach ``first``
    await _settle()
    assert second.cancelled() and first.done() and gate.open == 1
    gate.release(False)
    assert gate.open == 0 and gate.waiting() == 0


class _Raw:
    status = 200

    async def read(self) -> bytes:
        return b"{}"

    def release(self) -> None:
        pass


class _HeldClient:
    """A client whose first request is answered only when ``free`` is set; records the order."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.free = asyncio.Event()

    async def call_api(self, path: str, method: str, **_: Any) -> _Raw:
        self.paths.append(path)
        if len(self.paths) == 1:
            await self.free.wait()
        return _Raw()

    async def close(self) -> None:
        pass


async def test_requests_inside_urgent_overtake_requests_waiting_for_a_slot() -> None:
    client = _HeldClient()
    api = KubeApi(client, open_requests=1)
    holding = asyncio.ensure_future(api.request("GET", "/first"))
    await _settle()

    async def bind() -> None:
        with urgent():
            await api.request("POST", "/bind")

    queued = [asyncio.ensure_future(api.request("PATCH", "/status")), asyncio.ensure_future(bind())]
    await _settle()
    client.free.set()
    await asyncio.gather(holding, *queued)
    assert client.paths == ["/first", "/bind", "/status"]


async def test_a_binding_carries_the_annotations_the_pod_is_to_get() -> None:
    api = FakeApi(lambda m, p, q, b: ok())
    annotation = ((L.POD_GROUP_ANNOTATION, "pg-p-u1"),)
    [outcome] = await Binder(api).bind_all([BindRequest("ns/p", "u1", "n1", annotations=annotation)])  # type: ignore[arg-type]
    assert outcome.ok
    [(method, path, body)] = api.calls
    assert (method, path) == ("POST", PODS.item("p", "ns", "binding"))
    assert body["metadata"] == {
        "name": "p",
        "namespace": "ns",
        "uid": "u1",
        "annotations": {"pod-group-name": "pg-p-u1"},
    }


def _bare(name: str, node: str | None = None, group: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"u-{name}", "labels": {}, "annotations": {}}
    if group:
        meta["annotations"][L.POD_GROUP_ANNOTATION] = group
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}}


async def test_a_bound_bare_pod_gets_its_podgroup_with_its_clocks_and_no_pod_patch() -> None:
    api = FakeApi(lambda m, p, q, b: ok())
    clocks = JobClockWriter(api)  # type: ignore[arg-type]
    await clocks.write({"ns/pg-p-u-p": JobClock(1_700_000_000.0, None, None)}, lambda _: False)
    assert clocks.waiting  # no PodGroup object yet: the clock waits
    grouper = PodGrouper(api, clocks=clocks)  # type: ignore[arg-type]
    assert await grouper.group([_bare("p", node="n1", group="pg-p-u-p")]) == 1
    [(method, path, body)] = api.calls
    assert (method, path) == ("POST", POD_GROUPS.collection("ns"))
    assert body["metadata"]["name"] == "pg-p-u-p"
    assert body["metadata"]["annotations"] == {L.LAST_START_ANNOTATION: rfc3339(1_700_000_000.0)}
    assert not clocks.waiting and not clocks.latest


async def test_clocks_the_podgroup_create_did_not_write_wait_again() -> None:
    def answer(method: str, path: str, query: Any, body: Any) -> Any:
        return fail(409, "AlreadyExists") if method == "POST" else ok()

    api = FakeApi(answer)
    clocks = JobClockWriter(api)  # type: ignore[arg-type]
    clock = JobClock(1_700_000_000.0, None, None)
    await clocks.write({"ns/pg-p-u-p": clock}, lambda _: False)
    grouper = PodGrouper(api, clocks=clocks)  # type: ignore[arg-type]
    assert await grouper.group([_bare("p", node="n1", group="pg-p-u-p")]) == 1
    assert clocks.waiting == {"ns/pg-p-u-p": clock}  # the clock writer patches them once the object is seen


async def test_a_new_bare_pod_is_left_to_its_bind_then_grouped_if_it_waits() -> None:
    now = [0.0]
    api = FakeApi(lambda m, p, q, b: ok())
    binding: set[str] = {"ns/a"}
    grouper = PodGrouper(api, binding, defer=3.0, clock=lambda: now[0])  # type: ignore[arg-type]
    pods = [_bare("a"), _bare("b")]
    assert await grouper.group(pods) == 0 and grouper.deferred == 2 and not api.calls
    now[0] = 3.5
    assert await grouper.group(pods) == 1  # b waited: grouped as before; a's bind is still open
    assert [(m, p) for m, p, _ in api.calls] == [("POST", POD_GROUPS.collection("ns")), ("PATCH", PODS.item("b", "ns"))]
    binding.clear()
    assert await grouper.group(pods[:1]) == 1 and not grouper.seen
    assert await grouper.group([_bare("c")]) == 0 and list(grouper.seen) == ["ns/c@u-c"]
    assert await grouper.group([]) == 0 and not grouper.seen  # gone from the list: forgotten


def test_a_pod_bound_with_its_own_group_before_the_object_stays_a_one_pod_gang_on_the_grouper_list() -> None:
    cache = ClusterCache()
    bound = pod("p", 1, group=None)
    bound["metadata"].update(namespace="default", uid="u1", resourceVersion="5")
    bound["metadata"]["annotations"][L.POD_GROUP_ANNOTATION] = "pg-p-u1"
    bound["spec"]["nodeName"] = "n1"
    bound["status"] = {"phase": "Running"}
    cache.on_list(PODS, [bound])
    deltas = cache.take_deltas()
    assert "default/pg-p-u1" in cache.pod_groups and [g.key for g in deltas.pod_groups_upserted] == ["default/pg-p-u1"]
    assert [p["metadata"]["name"] for p in cache.ungrouped()] == ["p"]
    made = {"metadata": {"name": "pg-p-u1", "namespace": "default", "uid": "g1", "resourceVersion": "6"}}
    cache.on_event(POD_GROUPS, "ADDED", {**made, "spec": {"minMember": 1, "queue": "default-queue"}})
    cache.take_deltas()
    assert cache.ungrouped() == [] and "default/pg-p-u1" in cache.pod_groups
    assert cache.members("default/pg-p-u1") == ["default/p"]


async def test_a_bare_pod_is_bound_with_its_annotation_and_its_podgroup_made_after(env: Env) -> None:
    await env.create("/apis/scheduling.run.ai/v2/queues", queue("default-queue"))
    await env.create("/api/v1/namespaces/default/pods", pod("solo", 1, queue_name="default-queue"))
    loop = env.loop()

    def state() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        [solo] = env.cluster.objects("", "v1", "pods", "default")
        return solo, env.cluster.objects("scheduling.run.ai", "v2alpha2", "podgroups", "default")

    async with running(loop):
        await until(lambda: state()[0]["spec"].get("nodeName") and state()[1], 20)
        solo, [group] = state()
        name = f"pg-solo-{solo['metadata']['uid']}"
        assert solo["metadata"]["annotations"][L.POD_GROUP_ANNOTATION] == name == group["metadata"]["name"]
        await until(lambda: L.LAST_START_ANNOTATION in (state()[1][0]["metadata"].get("annotations") or {}), 10)
