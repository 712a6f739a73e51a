"""Create, read, update, patch, delete and list through the real kubernetes-asyncio client."""

from __future__ import annotations

import json

import pytest
from kubernetes_asyncio.client import ApiException

from tests.devcluster.conftest import ON_TEST_LOOP, Kube, eventually, pod, pod_group, queue

pytestmark = ON_TEST_LOOP
# kubernetes-asyncio sends a dict patch for a custom object as a JSON patch unless told otherwise.
MERGE = "application/merge-patch+json"


def status_of(exc: ApiException) -> dict:
    return json.loads(exc.body)


async def test_pods_and_nodes_round_trip_with_server_owned_metadata(kube: Kube) -> None:
    created = await kube.core.create_namespaced_pod("default", pod("a"))
    assert created.metadata.uid and created.metadata.creation_timestamp
    assert created.metadata.generation == 1
    assert created.status.phase == "Pending" and created.spec.scheduler_name == "kai-scheduler"
    assert created.spec.containers[0].resources.requests == {"nvidia.com/gpu": "1"}  # defaulted from limits
    read = await kube.core.read_namespaced_pod("a", "default")
    assert read.metadata.resource_version == created.metadata.resource_version
    nodes = await kube.core.list_node()
    assert [n.metadata.name for n in nodes.items] == ["kwok-node-0", "kwok-node-1", "kwok-node-2", "kwok-node-3"]
    assert nodes.items[0].status.allocatable["nvidia.com/gpu"] == "8"
    node = await kube.core.create_node(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "extra"}, "status": {"allocatable": {"cpu": "4"}}}
    )
    assert node.status.allocatable == {"cpu": "4"}  # nodes keep the status they register with


async def test_resource_versions_grow_across_kinds(kube: Kube) -> None:
    first = await kube.core.create_namespaced_pod("default", pod("a"))
    q = await kube.custom.create_cluster_custom_object("scheduling.run.ai", "v2", "queues", queue("q"))
    second = await kube.core.create_namespaced_pod("default", pod("b"))
    versions = [
        int(first.metadata.resource_version),
        int(q["metadata"]["resourceVersion"]),
        int(second.metadata.resource_version),
    ]
    assert versions == sorted(versions) and len(set(versions)) == 3
    listed = await kube.core.list_namespaced_pod("default")
    assert int(listed.metadata.resource_version) >= versions[-1]


async def test_duplicate_create_is_409_already_exists(kube: Kube) -> None:
    await kube.core.create_namespaced_pod("default", pod("a"))
    with pytest.raises(ApiException) as caught:
        await kube.core.create_namespaced_pod("default", pod("a"))
    assert caught.value.status == 409
    body = status_of(caught.value)
    assert body["kind"] == "Status" and body["reason"] == "AlreadyExists" and body["code"] == 409
    assert body["message"] == 'pods "a" already exists'


async def test_missing_object_and_namespace_are_404_status(kube: Kube) -> None:
    with pytest.raises(ApiException) as caught:
        await kube.core.read_namespaced_pod("nope", "default")
    assert caught.value.status == 404 and status_of(caught.value)["reason"] == "NotFound"
    with pytest.raises(ApiException) as caught:
        await kube.core.create_namespaced_pod("no-such-ns", pod("a"))
    assert caught.value.status == 404 and status_of(caught.value)["message"] == 'namespaces "no-such-ns" not found'


async def test_invalid_pod_is_422(kube: Kube) -> None:
    bad = pod("a")
    bad["spec"]["containers"] = []
    with pytest.raises(ApiException) as caught:
        await kube.core.create_namespaced_pod("default", bad)
    body = status_of(caught.value)
    assert caught.value.status == 422 and body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "spec.containers"


async def test_stale_update_is_409_conflict_and_fresh_one_bumps_generation(kube: Kube) -> None:
    q = await kube.custom.create_cluster_custom_object("scheduling.run.ai", "v2", "queues", queue("q"))
    fresh = {**q, "spec": {**q["spec"], "priority": 200}}
    updated = await kube.custom.replace_cluster_custom_object("scheduling.run.ai", "v2", "queues", "q", fresh)
    assert updated["metadata"]["generation"] == 2
    assert int(updated["metadata"]["resourceVersion"]) > int(q["metadata"]["resourceVersion"])
    stale = {**q, "spec": {**q["spec"], "priority": 300}}  # still carries the first resourceVersion
    with pytest.raises(ApiException) as caught:
        await kube.custom.replace_cluster_custom_object("scheduling.run.ai", "v2", "queues", "q", stale)
    body = status_of(caught.value)
    assert caught.value.status == 409 and body["reason"] == "Conflict"
    assert "the object has been modified" in body["message"]


async def test_status_subresource_is_split_from_the_object(kube: Kube) -> None:
    created = await kube.custom.create_namespaced_custom_object(
        "scheduling.run.ai", "v2alpha2", "default", "podgroups", {**pod_group("pg", "q"), "status": {"phase": "X"}}
    )
    assert "status" not in created  # status is dropped on create when it has its own endpoint
    patched = await kube.custom.patch_namespaced_custom_object_status(
        "scheduling.run.ai",
        "v2alpha2",
        "default",
        "podgroups",
        "pg",
        {
            "status": {"schedulingConditions": [{"type": "UnschedulableOnNodePool", "status": "True"}]},
            "spec": {"minMember": 9},
        },
        _content_type=MERGE,
    )
    assert patched["status"]["schedulingConditions"][0]["status"] == "True"
    assert patched["spec"]["minMember"] == 1 and patched["metadata"]["generation"] == 1  # spec untouched by /status
    spec_patch = await kube.custom.patch_namespaced_custom_object(
        "scheduling.run.ai",
        "v2alpha2",
        "default",
        "podgroups",
        "pg",
        {"spec": {"minMember": 3}, "status": None},
        _content_type=MERGE,
    )
    assert spec_patch["spec"]["minMember"] == 3 and spec_patch["metadata"]["generation"] == 2
    assert spec_patch["status"]["schedulingConditions"]  # ...and status untouched by the main resource


async def test_an_update_that_changes_nothing_keeps_the_version(kube: Kube) -> None:
    q = await kube.custom.create_cluster_custom_object("scheduling.run.ai", "v2", "queues", queue("q"))
    same = await kube.custom.patch_cluster_custom_object(
        "scheduling.run.ai", "v2", "queues", "q", {"spec": {"resources": q["spec"]["resources"]}}, _content_type=MERGE
    )
    assert same["metadata"]["resourceVersion"] == q["metadata"]["resourceVersion"]


async def test_patch_flavours(kube: Kube) -> None:
    await kube.core.create_namespaced_pod("default", pod("a", labels={"keep": "1", "drop": "1"}))
    status, body = await kube.raw(
        "PATCH",
        "/api/v1/namespaces/default/pods/a",
        {"metadata": {"labels": {"drop": None, "new": "2"}}},
        content_type="application/merge-patch+json",
    )
    assert status == 200 and body["metadata"]["labels"] == {"keep": "1", "new": "2"}
    status, body = await kube.raw(
        "PATCH",
        "/api/v1/namespaces/default/pods/a",
        [
            {"op": "add", "path": "/metadata/annotations/x", "value": "y"},
            {"op": "test", "path": "/metadata/labels/keep", "value": "1"},
        ],
        content_type="application/json-patch+json",
    )
    assert status == 200 and body["metadata"]["annotations"]["x"] == "y"
    status, body = await kube.raw(
        "PATCH",
        "/api/v1/namespaces/default/pods/a/status",
        {"status": {"conditions": [{"type": "DisruptionTarget", "status": "True"}]}},
        content_type="application/strategic-merge-patch+json",
    )
    status, body = await kube.raw(
        "PATCH",
        "/api/v1/namespaces/default/pods/a/status",
        {"status": {"conditions": [{"type": "Custom", "status": "False"}]}},
        content_type="application/strategic-merge-patch+json",
    )
    assert status == 200
    assert {c["type"] for c in body["status"]["conditions"]} == {"DisruptionTarget", "Custom"}  # merged by type
    status, body = await kube.raw(
        "PATCH",
        "/api/v1/namespaces/default/pods/a",
        [{"op": "test", "path": "/metadata/labels/keep", "value": "nope"}],
        content_type="application/json-patch+json",
    )
    assert status == 422
    status, body = await kube.raw(
        "PATCH",
        "/api/v1/namespaces/default/pods/a",
        {"spec": {"schedulerName": "other"}},
        content_type="application/merge-patch+json",
    )
    assert status == 422 and "pod updates may not change fields" in body["message"]


async def test_strategic_merge_patch_is_refused_for_custom_resources(kube: Kube) -> None:
    await kube.custom.create_cluster_custom_object("scheduling.run.ai", "v2", "queues", queue("q"))
    status, body = await kube.raw(
        "PATCH",
        "/apis/scheduling.run.ai/v2/queues/q",
        {"spec": {"priority": 1}},
        content_type="application/strategic-merge-patch+json",
    )
    assert status == 415 and body["reason"] == "UnsupportedMediaType"


async def test_patch_with_a_stale_resource_version_is_409(kube: Kube) -> None:
    created = await kube.core.create_namespaced_pod("default", pod("a"))
    await kube.core.patch_namespaced_pod("a", "default", {"metadata": {"labels": {"x": "1"}}})
    with pytest.raises(ApiException) as caught:
        await kube.core.patch_namespaced_pod(
            "a", "default", {"metadata": {"resourceVersion": created.metadata.resource_version, "labels": {"x": "2"}}}
        )
    assert caught.value.status == 409


async def test_label_and_field_selectors(kube: Kube) -> None:
    await kube.core.create_namespaced_pod("default", pod("a", labels={"app": "x", "tier": "1"}))
    await kube.core.create_namespaced_pod("default", pod("b", labels={"app": "y"}))
    await kube.core.create_namespaced_pod("default", pod("c", node="kwok-node-1"))

    async def names(**kw: str) -> list[str]:
        return [p.metadata.name for p in (await kube.core.list_namespaced_pod("default", **kw)).items]

    assert await names(label_selector="app=x") == ["a"]
    assert await names(label_selector="app==x") == ["a"]
    assert await names(label_selector="app!=x") == ["b", "c"]
    assert await names(label_selector="app in (x, y)") == ["a", "b"]
    assert await names(label_selector="app notin (x)") == ["b", "c"]
    assert await names(label_selector="tier") == ["a"]
    assert await names(label_selector="!tier") == ["b", "c"]
    assert await names(label_selector="app,!tier") == ["b"]
    assert await names(field_selector="spec.nodeName=") == ["a", "b"]
    assert await names(field_selector="spec.nodeName=kwok-node-1") == ["c"]
    assert await names(field_selector="spec.schedulerName=kai-scheduler,metadata.name!=a") == ["b", "c"]
    # c is bound, so the simulated kubelet may already have started it: only the unbound two are surely Pending.
    assert await names(field_selector="status.phase=Pending,spec.nodeName=,metadata.namespace=default") == ["a", "b"]
    await eventually(lambda: kube.cluster.get("", "v1", "pods", "c", "default")["status"]["phase"] == "Running")
    assert await names(field_selector="status.phase!=Pending") == ["c"]
    with pytest.raises(ApiException) as caught:
        await names(field_selector="spec.priorityClassName=x")
    assert caught.value.status == 400 and "field label not supported" in status_of(caught.value)["message"]
    with pytest.raises(ApiException) as caught:
        await names(label_selector="app in (")
    assert caught.value.status == 400


async def test_paging_is_consistent_at_the_first_page_version(kube: Kube) -> None:
    for i in range(7):
        await kube.core.create_namespaced_pod("default", pod(f"p{i}"))
    first = await kube.core.list_namespaced_pod("default", limit=3)
    assert [p.metadata.name for p in first.items] == ["p0", "p1", "p2"]
    assert first.metadata.remaining_item_count == 4 and first.metadata._continue
    await kube.core.create_namespaced_pod("default", pod("p3a"))  # lands between pages: not in this list
    await kube.core.delete_namespaced_pod("p5", "default")
    second = await kube.core.list_namespaced_pod("default", limit=3, _continue=first.metadata._continue)
    third = await kube.core.list_namespaced_pod("default", limit=3, _continue=second.metadata._continue)
    assert [p.metadata.name for p in second.items + third.items] == ["p3", "p4", "p5", "p6"]
    assert not third.metadata._continue
    assert second.metadata.resource_version == first.metadata.resource_version
    kube.cluster.expire_history()
    with pytest.raises(ApiException) as caught:
        await kube.core.list_namespaced_pod("default", limit=3, _continue=first.metadata._continue)
    assert caught.value.status == 410


async def test_delete_honours_grace_preconditions_and_finalizers(kube: Kube) -> None:
    await kube.core.create_namespaced_pod("default", pod("unbound"))
    gone = await kube.core.delete_namespaced_pod("unbound", "default")
    assert gone.metadata.name == "unbound"
    assert await _exists(kube, "unbound") is False  # nothing was running: deleted at once

    await kube.core.create_namespaced_pod("default", pod("bound", node="kwok-node-0"))
    terminating = await kube.core.delete_namespaced_pod("bound", "default", grace_period_seconds=30)
    assert terminating.metadata.deletion_timestamp and terminating.metadata.deletion_grace_period_seconds == 30
    assert kube.cluster.get("", "v1", "pods", "bound", "default") is not None  # left to the node simulator

    created = await kube.core.create_namespaced_pod("default", pod("forced", node="kwok-node-0"))
    with pytest.raises(ApiException) as caught:
        await kube.core.delete_namespaced_pod("forced", "default", body={"preconditions": {"uid": "other"}})
    assert caught.value.status == 409 and "Precondition failed" in status_of(caught.value)["message"]
    await kube.core.delete_namespaced_pod(
        "forced", "default", grace_period_seconds=0, body={"preconditions": {"uid": created.metadata.uid}}
    )
    assert await _exists(kube, "forced") is False

    held = pod("held")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    await kube.core.create_namespaced_pod("default", held)
    marked = await kube.core.delete_namespaced_pod("held", "default")
    assert marked.metadata.deletion_timestamp and await _exists(kube, "held") is True
    await kube.core.patch_namespaced_pod("held", "default", [{"op": "remove", "path": "/metadata/finalizers"}])
    assert await _exists(kube, "held") is False


async def _exists(kube: Kube, name: str) -> bool:
    try:
        await kube.core.read_namespaced_pod(name, "default")
    except ApiException as exc:
        assert exc.status == 404
        return False
    return True
