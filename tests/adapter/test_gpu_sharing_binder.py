"""The binder's GPU-sharing steps against the dev cluster: what one attempt leaves behind."""

from __future__ import annotations

from typing import Any

from k8s_adapter.binder import Binder, BindRequest, FractionBind
from k8s_adapter.gpu_sharing import ReservationService, ReservationSettings, reservation_pod_name
from tests.adapter import gpu_sharing_scenario as scenario
from tests.adapter.conftest import Env, until

NODE = "kwok-node-0"


def _objects(env: Env, plural: str, namespace: str) -> list[dict[str, Any]]:
    return env.cluster.objects("", "v1", plural, namespace)


async def _fraction_pod(env: Env, name: str) -> dict[str, Any]:
    setting = scenario.Setting()
    return await env.create("/api/v1/namespaces/default/pods", scenario.fractional_pod(name, setting))


def _binder(env: Env, timeout: float = 5.0) -> Binder:
    service = ReservationService(env.api, ReservationSettings(timeout=timeout, poll=0.05))
    return Binder(env.api, attempts=2, base_delay=0.01, reservations=service)


async def test_a_bind_that_keeps_failing_leaves_no_label_configmap_or_reservation_pod(env: Env) -> None:
    created = await _fraction_pod(env, "half")
    env.cluster.faults.fail("create", "pods", 500, subresource="binding", times=2)
    binder = _binder(env)
    [outcome] = await binder.bind_all(
        [BindRequest("default/half", created["metadata"]["uid"], NODE, ("g1",), FractionBind("0.50"))]
    )
    assert not outcome.ok and "retries exhausted" in outcome.reason
    assert binder.rollbacks == 2 and binder.reservations.created == 2
    pod = env.cluster.get("", "v1", "pods", "half", "default")
    assert not pod["spec"].get("nodeName")
    assert not any(k.startswith("runai-gpu-group") for k in pod["metadata"].get("labels") or {})
    assert _objects(env, "configmaps", "default") == []
    await until(lambda: _objects(env, "pods", "kai-resource-reservation") == [])


async def test_a_retry_after_a_failed_attempt_binds_with_its_reservation_and_configmaps(env: Env) -> None:
    created = await _fraction_pod(env, "half")
    env.cluster.faults.fail("create", "pods", 500, subresource="binding", times=1)
    [outcome] = await _binder(env).bind_all(
        [BindRequest("default/half", created["metadata"]["uid"], NODE, ("g1",), FractionBind("0.50"))]
    )
    assert outcome.ok
    pod = env.cluster.get("", "v1", "pods", "half", "default")
    assert pod["spec"]["nodeName"] == NODE and pod["metadata"]["labels"]["runai-gpu-group"] == "g1"
    [holder] = _objects(env, "pods", "kai-resource-reservation")
    assert holder["metadata"]["name"] == reservation_pod_name(NODE, "g1")
    maps = {m["metadata"]["name"]: m["data"] for m in _objects(env, "configmaps", "default")}
    index = holder["metadata"]["annotations"]["run.ai/reserve_for_gpu_index"]
    assert maps["half-shared-gpu-0"] == {
        "GPU_PORTION": "0.50",
        "RUNAI_NUM_OF_GPUS": "0.50",
        "NVIDIA_VISIBLE_DEVICES": index,
    }
    assert maps["half-shared-gpu-0-evar"] == {}


async def test_a_reservation_pod_that_never_reports_its_gpu_is_removed_and_the_pod_stays_unbound(env: Env) -> None:
    created = await _fraction_pod(env, "half")
    # The reservation pod is bound to a node that does not exist: it never starts, never reports.
    [outcome] = await _binder(env, timeout=0.3).bind_all(
        [BindRequest("default/half", created["metadata"]["uid"], "no-such-node", ("g1",), FractionBind("0.50"))]
    )
    assert not outcome.ok and "reported no GPU index" in outcome.reason
    assert _objects(env, "pods", "kai-resource-reservation") == []
    assert not env.cluster.get("", "v1", "pods", "half", "default")["spec"].get("nodeName")


async def test_two_pods_of_one_new_group_bound_together_share_one_reservation_pod(env: Env) -> None:
    first = await _fraction_pod(env, "one")
    second = await _fraction_pod(env, "two")
    outcomes = await _binder(env).bind_all(
        [
            BindRequest("default/one", first["metadata"]["uid"], NODE, ("g1",), FractionBind("0.50")),
            BindRequest("default/two", second["metadata"]["uid"], NODE, ("g1",), FractionBind("0.50")),
        ]
    )
    assert all(o.ok for o in outcomes)
    assert len(_objects(env, "pods", "kai-resource-reservation")) == 1


async def test_a_multi_device_fraction_gets_one_label_and_device_per_group(env: Env) -> None:
    created = await _fraction_pod(env, "wide")
    [outcome] = await _binder(env).bind_all(
        [BindRequest("default/wide", created["metadata"]["uid"], NODE, ("g1", "g2"), FractionBind("0.25", True))]
    )
    assert outcome.ok
    labels = env.cluster.get("", "v1", "pods", "wide", "default")["metadata"]["labels"]
    assert labels["runai-gpu-group/g1"] == "g1" and labels["runai-gpu-group/g2"] == "g2"
    holders = _objects(env, "pods", "kai-resource-reservation")
    indexes = sorted(h["metadata"]["annotations"]["run.ai/reserve_for_gpu_index"] for h in holders)
    assert len(set(indexes)) == 2
    data = {m["metadata"]["name"]: m["data"] for m in _objects(env, "configmaps", "default")}
    assert data["wide-shared-gpu-0"]["NVIDIA_VISIBLE_DEVICES"] == ",".join(
        h["metadata"]["annotations"]["run.ai/reserve_for_gpu_index"]
        for h in sorted(holders, key=lambda h: h["metadata"]["labels"]["runai-gpu-group"])
    )
