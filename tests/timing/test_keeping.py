"""What the adapter keeps in the cluster so a restart carries on: KAI's PodGroup timestamps,
and kai-ray's usage accounting on the Queues (against the dev cluster over HTTP)."""

from __future__ import annotations

from typing import Any

from coordinator import JobClock
from coordinator.fairshare import UsageLedger, UsageWindow
from k8s_adapter.api import Response
from k8s_adapter.cache import ClusterCache
from k8s_adapter.job_clocks import JobClockWriter
from k8s_adapter.kinds import POD_GROUPS, QUEUES
from k8s_adapter.usage_store import FIELD, QueueUsageStore
from tests.adapter.conftest import Env, pod_group, queue
from tests.adapter.fake_api import FakeApi, fail, ok
from tests.helm.chart import custom_resource_problems

GROUPS = POD_GROUPS.collection("default")
T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z


async def test_timestamps_go_on_the_pod_group_as_kai_writes_them_and_read_back(env: Env) -> None:
    await env.create(QUEUES.collection(), queue("q"))
    await env.create(GROUPS, pod_group("pg", "q", 1))
    writer = JobClockWriter(env.api)
    await writer.write({"default/pg": JobClock(T0, T0 + 60.5, None)})
    annotations = (await env.get(f"{GROUPS}/pg"))["metadata"]["annotations"]
    assert annotations["kai.scheduler/last-start-timestamp"] == "2026-01-01T00:00:00Z"
    assert annotations["kai.scheduler/stale-podgroup-timestamp"] == "2026-01-01T00:01:00Z"
    assert "kai.scheduler/last-eviction-timestamp" not in annotations

    cache = ClusterCache()
    cache.on_list(POD_GROUPS, [await env.get(f"{GROUPS}/pg")])
    [group] = cache.take_deltas().pod_groups_upserted
    assert (group.last_start, group.stale_since, group.last_eviction) == (T0, T0 + 60, None)

    await writer.write({"default/pg": JobClock(T0, None, T0 + 90)})  # the gang is whole again, then evicted
    annotations = (await env.get(f"{GROUPS}/pg"))["metadata"]["annotations"]
    assert "kai.scheduler/stale-podgroup-timestamp" not in annotations
    assert annotations["kai.scheduler/last-eviction-timestamp"] == "2026-01-01T00:01:30Z"


async def test_a_failed_write_is_retried_but_never_undoes_a_newer_one() -> None:
    failing = {"on": True}

    def handler(method: str, path: str, query: Any, body: Any) -> Response:
        if failing["on"]:
            fail(503)
        return ok()

    api = FakeApi(handler)
    writer = JobClockWriter(api)  # type: ignore[arg-type]
    await writer.write({"ns/a": JobClock(T0, None, None), "ns/gone": JobClock(T0, None, None)})
    assert set(writer.retry) == {"ns/a", "ns/gone"}
    failing["on"] = False
    newer = JobClock(T0 + 5, None, None)
    await writer.write({"ns/a": newer})
    written = [(path, body) for _, path, body in api.calls[-2:]]
    assert sorted(p.rsplit("/", 1)[1] for p, _ in written) == ["a", "gone"]
    [body_a] = [b for p, b in written if p.endswith("/a")]
    assert body_a["metadata"]["annotations"]["kai.scheduler/last-start-timestamp"] == "2026-01-01T00:00:05Z"
    assert writer.retry == {}


def _ledger() -> UsageLedger:
    ledger = UsageLedger(UsageWindow(3600), resolution=60)
    ledger.observe(T0, {"team": (8, 16_000, 64e9), "dept": (8, 16_000, 64e9)}, (16, 64_000, 256e9))
    ledger.observe(T0 + 600, {"dept": (0, 0, 0)}, (16, 64_000, 256e9))
    ledger.observe(T0 + 1200, {}, (16, 64_000, 256e9))
    return ledger


async def test_usage_history_round_trips_through_the_queue_status(env: Env) -> None:
    for name, parent in (("dept", None), ("team", "dept")):
        await env.create(QUEUES.collection(), queue(name, parent=parent))
    ledger = _ledger()
    store = QueueUsageStore(env.api)
    assert await store.save(ledger.records()) == 2 and not store.pruned
    queue_obj = await env.get(QUEUES.item("team"))
    assert queue_obj["spec"]["resources"]["gpu"]["quota"] == -1  # nothing else of the queue changed
    assert custom_resource_problems(queue_obj) == []  # the chart's CRD declares the field

    back = UsageLedger(UsageWindow(3600), resolution=60)
    assert back.restore(await store.load()) == []
    assert back.usage(T0 + 1200) == ledger.usage(T0 + 1200)
    assert ledger.usage(T0 + 1200)["team"][0] == 0.25  # 8 of 16 GPUs for 600 of 1200 s


async def test_a_crd_that_prunes_the_field_is_reported_once() -> None:
    api = FakeApi(lambda m, p, q, b: ok({"status": {"allocated": {}}}))  # the field did not survive
    store = QueueUsageStore(api)  # type: ignore[arg-type]
    await store.save(_ledger().records())
    assert store.pruned
    assert {path for _, path, _ in api.calls} == {QUEUES.item(n, None, "status") for n in ("team", "dept")}
    assert all(FIELD in body["status"] for _, _, body in api.calls)


async def test_the_pod_grouper_carries_a_workloads_timing_annotations_to_its_pod_group() -> None:
    from pod_grouper.live import PodGrouper

    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "uid": "u-1", "annotations": {"kai.scheduler/preemption-delay": "5m"}},
        "spec": {},
    }
    api = FakeApi(lambda m, p, q, b: ok(owner) if m == "GET" else ok())
    pod = {
        "metadata": {
            "name": "train-0",
            "namespace": "ml",
            "annotations": {"kai.scheduler/preemption-delay": "1m", "kai.scheduler/staleness-grace-period": "2m"},
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u-1", "controller": True}
            ],
        },
        "spec": {"schedulerName": "kai-scheduler"},
    }
    await PodGrouper(api).group([pod])  # type: ignore[arg-type]
    [created] = [body for method, path, body in api.calls if method == "POST"]
    assert created["metadata"]["annotations"] == {
        "kai.scheduler/preemption-delay": "5m",  # the owner's wins, as in KAI's grouper
        "kai.scheduler/staleness-grace-period": "2m",
    }
    assert custom_resource_problems(created) == []


async def test_a_group_known_only_in_memory_waits_for_its_object_without_requests() -> None:
    def handler(method: str, path: str, query: Any, body: Any) -> Response:
        return ok()

    api = FakeApi(handler)
    writer = JobClockWriter(api)  # type: ignore[arg-type]
    objects: set[str] = set()
    started = JobClock(T0, None, None)
    await writer.write({"ns/one-pod": started, "ns/done": started}, objects.__contains__, {"ns/one-pod", "ns/done"})
    assert api.calls == []  # no PATCH that could only be refused with 404

    objects.add("ns/one-pod")  # the pod grouper made the PodGroup
    await writer.write({}, objects.__contains__, {"ns/one-pod"})  # ns/done's pods are gone meanwhile
    assert [path.rsplit("/", 1)[1] for _, path, _ in api.calls] == ["one-pod"]
    assert writer.waiting == {} and writer.latest == {}
