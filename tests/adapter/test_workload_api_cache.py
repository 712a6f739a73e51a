"""The Kubernetes Workload API in the running scheduler: its kinds are watched only where the API
server serves them, its gangs reach the coordinator as PodGroups with their minCount, and the pod
grouper makes no KAI PodGroup for their pods."""

from __future__ import annotations

import asyncio
from typing import Any

from k8s_adapter.api import KubeError, Response
from k8s_adapter.cache import ClusterCache
from k8s_adapter.kinds import GANG_POD_GROUPS, PODS, WORKLOADS
from k8s_adapter.served_reflector import ServedReflector
from tests.adapter.fake_api import FakeApi, ok
from tests.adapter.test_cache_deltas import versioned
from tests.adapter.test_cache_reflector import pod

V1BETA1, V1ALPHA3, _ = GANG_POD_GROUPS


def gang(name: str, min_count: int, workload: str | None = None, **labels: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if workload:
        spec["workloadRef"] = {"workloadName": workload, "templateName": "workers"}
    return versioned({"metadata": {"name": name, "namespace": "ns", "labels": labels}, "spec": spec})


def workload(name: str, **labels: str) -> dict[str, Any]:
    template = {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}}
    return versioned(
        {"metadata": {"name": name, "namespace": "ns", "labels": labels}, "spec": {"podGroupTemplates": [template]}}
    )


def member(name: str, group: str) -> dict[str, Any]:
    obj = pod(name, 0)
    obj["spec"]["schedulingGroup"] = {"podGroupName": group}
    obj["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    return versioned(obj)


def test_a_gang_reaches_the_coordinator_with_its_min_count_and_its_workloads_queue() -> None:
    cache = ClusterCache()
    cache.on_list(WORKLOADS[0], [workload("trainer", **{"kai.scheduler/queue": "team-a"})])
    cache.on_list(V1BETA1, [gang("trainer-0", 3, workload="trainer")])
    cache.on_list(PODS, [member(f"w{i}", "trainer-0") for i in range(3)])
    deltas = cache.take_deltas()
    [group] = deltas.pod_groups_upserted
    assert (group.key, group.min_member, group.queue) == ("ns/trainer-0", 3, "team-a")
    assert group.workload_api.startswith("Workload API gang ns/trainer-0")
    assert {p.pod_group for p in deltas.pods_upserted} == {"trainer-0"}
    assert cache.ungrouped() == []  # the pod grouper makes no KAI PodGroup for them
    assert "ns/trainer-0" not in cache.raw_groups  # no KAI object: no status or clocks are written on it

    cache.on_event(WORKLOADS[0], "MODIFIED", workload("trainer", **{"kai.scheduler/queue": "team-b"}))
    [moved] = cache.take_deltas().pod_groups_upserted
    assert moved.queue == "team-b"  # a Workload's change reaches the gangs made from it
    cache.on_event(V1BETA1, "DELETED", gang("trainer-0", 3))
    assert cache.take_deltas().pod_groups_removed == ("ns/trainer-0",)


def test_a_malformed_gang_is_left_out_and_said_on_the_podgroup() -> None:
    cache = ClusterCache()
    broken = gang("bad", 1)
    broken["spec"]["schedulingPolicy"] = {}
    cache.on_list(V1BETA1, [broken])
    cache.take_deltas()
    [problem] = cache.problems_view.values()
    assert (problem.kind, problem.api_version, problem.skipped) == ("PodGroup", "scheduling.k8s.io/v1beta1", True)
    assert "must set exactly one of gang and basic" in problem.text


def discovery(served: dict[str, list[str]]) -> FakeApi:
    """An API server whose discovery lists ``served`` (path -> resources); other versions 404."""

    def handler(method: str, path: str, query: object, body: object) -> Response:
        if path in served:
            return ok({"resources": [{"name": name} for name in served[path]]})
        if path.startswith("/apis/scheduling.k8s.io/") and path.count("/") == 3:
            raise KubeError(404, "NotFound")
        return ok({"metadata": {"resourceVersion": "5"}, "items": [gang("g", 2)]})

    return FakeApi(handler)


async def test_a_cluster_without_the_api_is_synced_at_once_and_nothing_is_watched() -> None:
    # 1.34: no such versions; a 1.37 server with the feature gate off serves v1beta1 without the resource.
    for api in (discovery({}), discovery({"/apis/scheduling.k8s.io/v1beta1": ["priorityclasses"]})):
        reflector = ServedReflector(api, GANG_POD_GROUPS, lambda k, items: None, lambda k, e, o: None)  # type: ignore[arg-type]
        await asyncio.wait_for(reflector.run(), 5)
        assert reflector.stats.synced.is_set() and reflector.served is False
        assert [c for c in api.calls if c[0] == "WATCH" or "podgroups" in c[1]] == []


async def test_the_newest_served_version_is_watched() -> None:
    api = discovery({"/apis/scheduling.k8s.io/v1alpha3": ["podgroups", "workloads"]})
    cache = ClusterCache()
    reflector = ServedReflector(api, GANG_POD_GROUPS, cache.on_list, cache.on_event, watch_seconds=1)  # type: ignore[arg-type]
    task = asyncio.create_task(reflector.run())
    await asyncio.wait_for(reflector.stats.synced.wait(), 5)
    reflector.stop()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert reflector.kind is V1ALPHA3 and reflector.served
    assert ("GET", "/apis/scheduling.k8s.io/v1alpha3/podgroups", None) in api.calls
    [group] = cache.take_deltas().pod_groups_upserted
    assert group.min_member == 2 and group.workload_api


def test_a_field_not_honoured_is_said_on_the_podgroup_and_the_gang_still_scheduled() -> None:
    cache = ClusterCache()
    asks = gang("trainer-0", 2)
    asks["spec"]["preemptionPolicy"] = "Never"
    cache.on_list(V1BETA1, [asks])
    [group] = cache.take_deltas().pod_groups_upserted
    assert group.min_member == 2
    [problem] = cache.problems_view.values()
    assert (problem.kind, problem.api_version, problem.skipped) == ("PodGroup", "scheduling.k8s.io/v1beta1", False)
    assert problem.text.startswith("PodGroup ns/trainer-0: spec.preemptionPolicy Never is not honoured")
