"""Gate removals: one PATCH per admitted pod, even when cycles name it again before the watch
brings the pod back without its gate; a removal that failed is tried again."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from k8s_adapter.api import Response
from k8s_adapter.cache import ClusterCache
from k8s_adapter.kinds import PODS
from k8s_adapter.metrics import SchedulerMetrics
from k8s_adapter.ungate_sender import UngateSender
from tests import manifests as m
from tests.adapter.fake_api import FakeApi, fail, ok

GATE = [{"name": "kai.scheduler/queue-admission"}]


def gated(name: str) -> dict[str, Any]:
    manifest = m.pod(name, "q", group=name)
    manifest["spec"]["schedulingGates"] = GATE
    return manifest


async def test_a_pod_is_ungated_once_while_the_watch_catches_up_and_a_failure_is_retried() -> None:
    cache = ClusterCache()
    cache.on_list(PODS, [gated("goes"), gated("refused")])
    cache.take_deltas()
    patched: list[str] = []
    refuse = [True]

    def answer(method: str, path: str, query: object, body: object) -> Response:
        patched.append(path.rsplit("/", 1)[-1])
        return fail(500) if path.endswith("/refused") and refuse[0] else ok({})

    sender = UngateSender(FakeApi(answer), cache, SchedulerMetrics(CollectorRegistry()))  # type: ignore[arg-type]
    assert await sender.send(["team/goes", "team/refused"]) == 1
    refuse[0] = False
    # The next cycle still sees both gated (no watch event yet): only the failed one goes again.
    assert await sender.send(["team/goes", "team/refused"]) == 1
    assert sorted(patched) == ["goes", "refused", "refused"]
    assert (sender.removed, sender.failed) == (2, 1)

    ungated = m.pod("goes", "q", group="goes")  # the watch brings it back without its gate
    cache.on_event(PODS, "MODIFIED", ungated)
    cache.take_deltas()
    assert await sender.send(["team/goes"]) == 0
    assert sender.sent == {"team/refused"}  # "goes" is forgotten once the cache shows it ungated
