"""The dev cluster's kinds and discovery: KAI's CRDs served from the start, CRDs made through the API,
priority classes, discovery documents, server-side apply and the methods a resource allows."""

from __future__ import annotations

import pytest
from kubernetes_asyncio.client import ApiException

from tests.devcluster.conftest import Kube, pod, pod_group, queue


async def test_queues_and_podgroups_are_served_from_the_start(kube: Kube) -> None:
    await kube.custom.create_cluster_custom_object("scheduling.run.ai", "v2", "queues", queue("team-a"))
    await kube.custom.create_namespaced_custom_object(
        "scheduling.run.ai", "v2alpha2", "default", "podgroups", pod_group("pg", "team-a")
    )
    queues = await kube.custom.list_cluster_custom_object("scheduling.run.ai", "v2", "queues")
    assert [q["metadata"]["name"] for q in queues["items"]] == ["team-a"]
    assert queues["kind"] == "QueueList"
    groups = await kube.custom.list_custom_object_for_all_namespaces("scheduling.run.ai", "v2alpha2", "podgroups")
    assert [(g["metadata"]["namespace"], g["spec"]["queue"]) for g in groups["items"]] == [("default", "team-a")]
    await kube.custom.delete_cluster_custom_object("scheduling.run.ai", "v2", "queues", "team-a")
    assert (await kube.custom.list_cluster_custom_object("scheduling.run.ai", "v2", "queues"))["items"] == []


async def test_a_crd_created_through_the_api_is_served_and_its_removal_deletes_objects(kube: Kube) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object"}}}
            ],
        },
    }
    status, body = await kube.raw("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert status == 201
    assert {c["type"] for c in body["status"]["conditions"]} == {"NamesAccepted", "Established"}
    status, discovery = await kube.raw("GET", "/apis/example.com/v1")
    assert status == 200 and discovery["resources"][0]["shortNames"] == ["wd"]
    await kube.custom.create_namespaced_custom_object(
        "example.com",
        "v1",
        "default",
        "widgets",
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "size": 3},
    )
    got = await kube.custom.get_namespaced_custom_object("example.com", "v1", "default", "widgets", "w")
    assert got["size"] == 3
    await kube.raw("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com")
    status, _ = await kube.raw("GET", "/apis/example.com/v1/namespaces/default/widgets/w")
    assert status == 404


async def test_priority_class_resolves_pod_priority(kube: Kube) -> None:
    await kube.raw(
        "POST",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "train"}, "value": 50},
    )
    spec = pod("a")
    spec["spec"]["priorityClassName"] = "train"
    created = await kube.core.create_namespaced_pod("default", spec)
    assert created.spec.priority == 50
    spec = pod("b")
    spec["spec"]["priorityClassName"] = "missing"
    with pytest.raises(ApiException) as caught:
        await kube.core.create_namespaced_pod("default", spec)
    assert caught.value.status == 403


async def test_discovery_documents(kube: Kube) -> None:
    status, core = await kube.raw("GET", "/api/v1")
    by_name = {r["name"]: r for r in core["resources"]}
    assert by_name["pods"]["shortNames"] == ["po"] and by_name["nodes"]["shortNames"] == ["no"]
    assert by_name["pods/binding"]["verbs"] == ["create"] and by_name["pods/eviction"]["group"] == "policy"
    assert "watch" in by_name["pods"]["verbs"] and by_name["pods"]["namespaced"] is True
    _, kai = await kube.raw("GET", "/apis/scheduling.run.ai")
    assert [v["version"] for v in kai["versions"]] == ["v2", "v2alpha2"]  # GA before alpha
    _, groups = await kube.raw("GET", "/apis/scheduling.run.ai/v2alpha2")
    podgroups = next(r for r in groups["resources"] if r["name"] == "podgroups")
    assert podgroups["shortNames"] == ["pg"] and podgroups["namespaced"] is True
    _, v2 = await kube.raw("GET", "/apis/scheduling.run.ai/v2")
    queues = next(r for r in v2["resources"] if r["name"] == "queues")
    assert queues["namespaced"] is False
    version = await kube.raw("GET", "/version")
    assert version[1]["major"] == "1"


async def test_server_side_apply_creates_then_merges(kube: Kube) -> None:
    # Apply bodies are YAML, and so JSON, which is what clients (kubectl, kubernetes-asyncio) send.
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "a", "labels": {"v": "1"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }
    path = "/api/v1/namespaces/default/pods/a"
    query = [("fieldManager", "test")]
    status, created = await kube.raw("PATCH", path, manifest, query, "application/apply-patch+yaml")
    assert status == 201 and created["spec"]["containers"][0]["terminationMessagePath"]
    manifest["metadata"]["labels"] = {"v": "2"}
    status, applied = await kube.raw("PATCH", path, manifest, query, "application/apply-patch+yaml")
    assert status == 200 and applied["metadata"]["labels"] == {"v": "2"}
    assert applied["spec"] == created["spec"]  # defaulted container fields survive the re-apply


async def test_methods_a_resource_does_not_allow_are_405(kube: Kube) -> None:
    await kube.core.create_namespaced_pod("default", pod("a"))
    for method, path in (
        ("PUT", "/api/v1/namespaces/default/pods"),
        ("POST", "/api/v1/namespaces/default/pods/a"),
        ("GET", "/api/v1/namespaces/default/pods/a/binding"),
        ("DELETE", "/api/v1/namespaces/default/pods/a/status"),
    ):
        status, body = await kube.raw(method, path, {})
        assert (status, body["reason"]) == (405, "MethodNotAllowed"), (method, path)
    status, _ = await kube.raw("GET", "/api/v1/namespaces/default/pods/a/status")
    assert status == 200
