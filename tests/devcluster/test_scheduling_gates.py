"""spec.schedulingGates as kube-apiserver treats them: set at creation only, then only removed."""

from __future__ import annotations

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from tests.devcluster.conftest import ON_TEST_LOOP, Kube, pod

pytestmark = ON_TEST_LOOP


def gated(name: str, *gates: str) -> dict:
    manifest = pod(name)
    manifest["spec"]["schedulingGates"] = [{"name": gate} for gate in gates]
    return manifest


async def test_a_pod_created_gated_says_so_in_its_scheduled_condition(kube: Kube) -> None:
    created = await kube.core.create_namespaced_pod("default", gated("a", "example.com/wait"))
    [condition] = [c for c in created.status.conditions if c.type == "PodScheduled"]
    assert (condition.status, condition.reason) == ("False", "SchedulingGated")


async def test_gates_can_be_removed_one_by_one_but_never_added(kube: Kube) -> None:
    await kube.core.create_namespaced_pod("default", gated("a", "example.com/one", "example.com/two"))
    remaining = {"spec": {"schedulingGates": [{"name": "example.com/two"}]}}
    patched = await kube.core.patch_namespaced_pod("a", "default", remaining)
    assert [g.name for g in patched.spec.scheduling_gates] == ["example.com/two"]
    for gates in ([{"name": "example.com/two"}, {"name": "example.com/three"}], [{"name": "example.com/one"}]):
        with pytest.raises(ApiException) as refused:
            await kube.core.patch_namespaced_pod("a", "default", {"spec": {"schedulingGates": gates}})
        assert refused.value.status == 422 and "only deletion is allowed" in str(refused.value.body)
    await kube.core.create_namespaced_pod("default", pod("b"))
    with pytest.raises(ApiException) as late:
        await kube.core.patch_namespaced_pod("b", "default", {"spec": {"schedulingGates": [{"name": "x/y"}]}})
    assert late.value.status == 422


async def test_a_pod_cannot_be_created_bound_and_gated(kube: Kube) -> None:
    manifest = gated("a", "example.com/wait")
    manifest["spec"]["nodeName"] = "kwok-node-1"
    with pytest.raises(ApiException) as refused:
        await kube.core.create_namespaced_pod("default", manifest)
    assert refused.value.status == 422 and "schedulingGates have been cleared" in str(refused.value.body)
