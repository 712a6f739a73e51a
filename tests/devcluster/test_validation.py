"""The dev cluster refuses what kube-apiserver refuses: GPU requests no real cluster can hold,
PodGroups and Queues that break KAI's CRD schema. Over HTTP, as kubectl would meet it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.devcluster.conftest import ON_TEST_LOOP, Kube, pod_group, queue

pytestmark = ON_TEST_LOOP
PODS = "/api/v1/namespaces/default/pods"


def pod_with(resources: dict[str, Any], name: str = "p") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "x", "resources": resources}]},
    }


@pytest.mark.parametrize(
    "resources, field, message",
    [
        ({"limits": {"nvidia.com/gpu": "0.5"}}, "limits[nvidia.com/gpu]", 'Invalid value: "0.5": must be an integer'),
        (
            {"limits": {"nvidia.com/gpu": "-1"}},
            "limits[nvidia.com/gpu]",
            'Invalid value: "-1": must be greater than or equal to 0',
        ),
        (
            {"requests": {"nvidia.com/gpu": "1"}},
            "limits[nvidia.com/gpu]",
            "Required value: Limit must be set for non overcommitable resources",
        ),
        (
            {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "1"}},
            "requests[nvidia.com/gpu]",
            'Invalid value: "2": must be equal to nvidia.com/gpu limit of 1',
        ),
        (
            {"requests": {"cpu": "4"}, "limits": {"cpu": "2"}},
            "requests[cpu]",
            'Invalid value: "4": must be less than or equal to cpu limit of 2',
        ),
    ],
)
async def test_pod_resources_a_real_apiserver_refuses(
    kube: Kube, resources: dict[str, Any], field: str, message: str
) -> None:
    status, body = await kube.raw("POST", PODS, pod_with(resources))
    assert status == 422, body
    causes = {(c["field"], c["message"]) for c in body["details"]["causes"]}
    assert (f"spec.containers[0].resources.{field}", message) in causes


async def test_an_unparsable_quantity_is_a_bad_request(kube: Kube) -> None:
    status, body = await kube.raw("POST", PODS, pod_with({"limits": {"nvidia.com/gpu": "abc"}}))
    assert status == 400 and "quantities must match the regular expression" in body["message"]


async def test_pods_a_real_apiserver_accepts(kube: Kube) -> None:
    accepted = [
        {"limits": {"nvidia.com/gpu": "2"}},  # the request defaults to the limit
        {"requests": {"nvidia.com/gpu": "1", "cpu": "500m"}, "limits": {"nvidia.com/gpu": "1", "cpu": "1"}},
        {"requests": {"cpu": "1", "memory": "1Gi"}},  # cpu and memory need no limit
    ]
    for i, resources in enumerate(accepted):
        status, body = await kube.raw("POST", PODS, pod_with(resources, f"ok-{i}"))
        assert status == 201, body


@pytest.mark.parametrize(
    "min_member, expected",
    [
        (-3, "spec.minMember: Invalid value: -3: spec.minMember in body should be greater than or equal to 0"),
        ("abc", 'spec.minMember: Invalid value: "string": spec.minMember in body must be of type integer: "string"'),
        (1.5, 'spec.minMember: Invalid value: "float": spec.minMember in body must be of type integer: "float"'),
    ],
)
async def test_pod_group_min_member_follows_the_crd_schema(kube: Kube, min_member: object, expected: str) -> None:
    group = pod_group("pg", "q")
    group["spec"]["minMember"] = min_member
    status, body = await kube.raw("POST", "/apis/scheduling.run.ai/v2alpha2/namespaces/default/podgroups", group)
    assert status == 422 and expected in body["message"], body


async def test_pod_group_sub_groups_and_queue_fields_follow_the_crd_schema(kube: Kube) -> None:
    group = pod_group("pg", "q", 0)  # 0 is allowed: no gang
    group["spec"]["subGroups"] = [{"name": "a", "minMember": -1}]
    status, body = await kube.raw("POST", "/apis/scheduling.run.ai/v2alpha2/namespaces/default/podgroups", group)
    assert status == 422 and "spec.subGroups[0].minMember" in body["message"]
    bad_queue = queue("q")
    bad_queue["spec"]["resources"]["gpu"]["quota"] = "lots"
    status, body = await kube.raw("POST", "/apis/scheduling.run.ai/v2/queues", bad_queue)
    assert status == 422 and "spec.resources.gpu.quota in body must be of type number" in body["message"]
    status, _ = await kube.raw("POST", "/apis/scheduling.run.ai/v2/queues", queue("q"))
    assert status == 201
