"""Binding and eviction against scripted API answers: retries, conflicts, budgets."""

from __future__ import annotations

from typing import Any

import pytest

from k8s_adapter.api import KubeError, Response
from k8s_adapter.binder import POD_GONE, POD_RECREATED, Binder, BindRequest
from k8s_adapter.evictor import Evictor, EvictRequest
from tests.adapter.fake_api import FakeApi, ok


async def test_a_bind_carries_the_pod_uid_and_succeeds() -> None:
    api = FakeApi(lambda m, p, q, b: ok())
    [outcome] = await Binder(api, base_delay=0).bind_all([BindRequest("ns/p", "uid-1", "n1")])  # type: ignore[arg-type]
    assert outcome.ok
    method, path, body = api.calls[0]
    assert (method, path) == ("POST", "/api/v1/namespaces/ns/pods/p/binding")
    assert body["metadata"]["uid"] == "uid-1" and body["target"]["name"] == "n1"


async def test_server_errors_are_retried_then_reported() -> None:
    answers = iter([KubeError(500, "boom"), KubeError(429, "slow down"), None])

    def handler(m: str, p: str, q: object, b: object) -> Response:
        nxt = next(answers)
        if nxt is not None:
            raise nxt
        return ok()

    api = FakeApi(handler)
    [outcome] = await Binder(api, base_delay=0).bind_all([BindRequest("ns/p", "u", "n1")])  # type: ignore[arg-type]
    assert outcome.ok and len(api.calls) == 3


async def test_a_conflict_is_success_only_when_bound_where_we_wanted() -> None:
    def handler(m: str, p: str, q: object, b: object) -> Response:
        if m == "POST":
            raise KubeError(409, "Conflict")
        return ok({"metadata": {"uid": "u"}, "spec": {"nodeName": "other"}})

    api = FakeApi(handler)
    [outcome] = await Binder(api, base_delay=0).bind_all([BindRequest("ns/p", "u", "n1")])  # type: ignore[arg-type]
    assert not outcome.ok and "bound to other" in outcome.reason


@pytest.mark.parametrize(
    "read",
    [
        KubeError(404, "NotFound"),  # deleted between the 409 and the read
        {"metadata": {"uid": "u", "deletionTimestamp": "2025-01-01T00:00:00Z"}, "spec": {}},  # being deleted
        {"metadata": {"uid": "another"}, "spec": {}},  # deleted and created again under its name
    ],
)
async def test_a_conflict_on_a_pod_that_goes_is_a_pod_gone_not_a_conflict(read: KubeError | dict[str, Any]) -> None:
    """Found by the real-cluster churn: kube-apiserver refuses to bind a terminating pod with 409."""

    def handler(m: str, p: str, q: object, b: object) -> Response:
        if m == "POST":
            raise KubeError(409, "Conflict")
        if isinstance(read, KubeError):
            raise read
        return ok(read)

    api = FakeApi(handler)
    [outcome] = await Binder(api, base_delay=0).bind_all([BindRequest("ns/p", "u", "n1")])  # type: ignore[arg-type]
    assert not outcome.ok and outcome.reason in (POD_GONE, POD_RECREATED)
    assert "conflict" not in outcome.reason
    assert sum(1 for m, _, _ in api.calls if m == "POST") == 1  # not retried: there is nothing to bind


async def test_an_eviction_blocked_by_a_budget_is_retried_on_later_cycles() -> None:
    refusals = [True]

    def handler(m: str, p: str, q: object, b: object) -> Response:
        if p.endswith("/eviction") and refusals:
            refusals.pop()
            raise KubeError(429, "TooManyRequests")
        return ok()

    api = FakeApi(handler)
    evictor = Evictor(api, retry_after=0)  # type: ignore[arg-type]
    first = await evictor.evict_all([EvictRequest("ns/p", "reclaim", "ns/big")])
    assert first.blocked == ["ns/p"] and not first.evicted
    second = await evictor.evict_all([])
    assert second.evicted == ["ns/p"] and not evictor.waiting


async def test_delete_mode_deletes_and_a_missing_pod_counts_as_gone() -> None:
    def handler(m: str, p: str, q: object, b: object) -> Response:
        if m == "DELETE":
            raise KubeError(404, "NotFound")
        return ok()

    api = FakeApi(handler)
    report = await Evictor(api, mode="delete").evict_all([EvictRequest("ns/p", "preempt")])  # type: ignore[arg-type]
    assert report.evicted == ["ns/p"]
    assert any(m == "PATCH" and p.endswith("/status") for m, p, _ in api.calls)  # DisruptionTarget first
