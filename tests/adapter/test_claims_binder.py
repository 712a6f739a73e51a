"""The binder's DRA step against the dev cluster: the claim is written before the bind, and a
failed attempt gives it back."""

from __future__ import annotations

from k8s_adapter.binder import Binder, BindRequest
from k8s_adapter.claims import ClaimBind, allocation_json
from kai_ray.model import ClaimAllocation, DeviceResult
from tests.adapter.conftest import Env, pod

CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
NODE = "kwok-node-1"
ALLOCATION = allocation_json(ClaimAllocation(NODE, (DeviceResult("gpu", "gpu.nvidia.com", NODE, "gpu-3"),)))


async def _setup(env: Env) -> str:
    await env.create(CLAIMS, {"metadata": {"name": "c"}, "spec": {"devices": {"requests": []}}})
    manifest = pod("p", gpus=0)
    manifest["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "c"}]
    created = await env.create("/api/v1/namespaces/default/pods", manifest)
    return str(created["metadata"]["uid"])


def _claim(env: Env) -> dict[str, object]:
    return env.cluster.get("resource.k8s.io", "v1", "resourceclaims", "c", "default")["status"] or {}


async def test_the_claim_is_allocated_and_reserved_before_the_pod_is_bound(env: Env) -> None:
    uid = await _setup(env)
    [outcome] = await Binder(env.api, base_delay=0.01).bind_all(
        [BindRequest("default/p", uid, NODE, claims=(ClaimBind("c", ALLOCATION),))]
    )
    assert outcome.ok
    status = _claim(env)
    assert status["allocation"] == ALLOCATION
    assert status["reservedFor"] == [{"resource": "pods", "name": "p", "uid": uid}]
    assert env.cluster.get("", "v1", "pods", "p", "default")["spec"]["nodeName"] == NODE


async def test_a_bind_that_fails_leaves_the_claim_as_it_found_it(env: Env) -> None:
    uid = await _setup(env)
    env.cluster.faults.fail("create", "pods", 403, subresource="binding", times=1)
    [outcome] = await Binder(env.api, base_delay=0.01).bind_all(
        [BindRequest("default/p", uid, NODE, claims=(ClaimBind("c", ALLOCATION),))]
    )
    assert not outcome.ok
    status = _claim(env)
    assert "allocation" not in status and not status.get("reservedFor")
    assert not env.cluster.get("", "v1", "pods", "p", "default")["spec"].get("nodeName")


async def test_a_claim_write_that_keeps_failing_binds_nothing(env: Env) -> None:
    uid = await _setup(env)
    env.cluster.faults.fail("update", "resourceclaims", 500, subresource="status", times=10)
    [outcome] = await Binder(env.api, attempts=2, base_delay=0.01).bind_all(
        [BindRequest("default/p", uid, NODE, claims=(ClaimBind("c", ALLOCATION),))]
    )
    assert not outcome.ok
    assert not env.cluster.get("", "v1", "pods", "p", "default")["spec"].get("nodeName")


async def test_the_allocation_carries_the_class_and_claim_config_the_driver_reads(env: Env) -> None:
    """The kubelet hands the DRA driver only what status.allocation.devices.config holds (e.g. the
    ComputeDomainChannelConfig of KAI's IMEX example): class config first, per request, then the claim's."""
    opaque = {"opaque": {"driver": "gpu.nvidia.com", "parameters": {"kind": "GpuConfig", "sharing": "TimeSlicing"}}}
    spec = {
        "devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}],
            "config": [{"requests": ["gpu"], **opaque}],
        }
    }
    await env.create(CLAIMS, {"metadata": {"name": "c"}, "spec": spec})
    manifest = pod("p", gpus=0)
    manifest["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "c"}]
    uid = str((await env.create("/api/v1/namespaces/default/pods", manifest))["metadata"]["uid"])
    class_config = {"opaque": {"driver": "gpu.nvidia.com", "parameters": {"kind": "ClassDefaults"}}}
    [outcome] = await Binder(env.api, base_delay=0.01).bind_all(
        [BindRequest("default/p", uid, NODE, claims=(ClaimBind("c", ALLOCATION, {"gpu.nvidia.com": [class_config]}),))]
    )
    assert outcome.ok
    devices = _claim(env)["allocation"]["devices"]  # type: ignore[index]
    assert devices["results"] == ALLOCATION["devices"]["results"]
    assert devices["config"] == [
        {"source": "FromClass", "requests": ["gpu"], **class_config},
        {"source": "FromClaim", "requests": ["gpu"], **opaque},
    ]
