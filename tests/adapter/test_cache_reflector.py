"""Watch events become model deltas; the reflector lists again when its version expires."""

from __future__ import annotations

import asyncio

from k8s_adapter.api import KubeError, Response
from k8s_adapter.cache import ClusterCache
from k8s_adapter.kinds import NODES, POD_GROUPS, PODS, PRIORITY_CLASSES, QUEUES
from k8s_adapter.reflector import Reflector
from tests.adapter.fake_api import FakeApi, ok


def node(name: str, rv: int, gpus: str = "8") -> dict:
    return {
        "metadata": {"name": name, "resourceVersion": str(rv)},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": gpus, "pods": "110"}},
    }


def pod(name: str, rv: int, **annotations: str) -> dict:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "resourceVersion": str(rv),
            "uid": f"u-{name}",
            "annotations": annotations,
            "labels": {"kai.scheduler/queue": "q"},
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [
                {
                    "name": "c",
                    "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}},
                }
            ],
        },
        "status": {"phase": "Pending"},
    }


def test_events_turn_into_deltas_and_stale_events_are_dropped() -> None:
    cache = ClusterCache()
    cache.on_list(NODES, [node("n1", 5)])
    cache.on_event(NODES, "MODIFIED", node("n1", 4, gpus="1"))  # older than what we hold
    deltas = cache.take_deltas()
    assert [n.allocatable.gpu for n in deltas.nodes_upserted] == [8]
    cache.on_event(NODES, "DELETED", node("n1", 6))
    assert cache.take_deltas().nodes_removed == ("n1",)


def test_a_malformed_object_is_skipped_not_fatal() -> None:
    cache = ClusterCache()
    bad = node("n2", 7)
    bad["status"]["allocatable"]["cpu"] = "lots"
    cache.on_event(NODES, "ADDED", bad)
    assert not cache.take_deltas().nodes_upserted and cache.decode_errors == 1
    [problem] = cache.problems_view.values()
    assert problem.skipped and problem.kind == "Node" and problem.name == "n2"
    assert "status.allocatable.cpu: bad quantity 'lots'" in problem.text


def test_pod_groups_resolve_priority_and_pods_without_one_get_an_implicit_group() -> None:
    cache = ClusterCache()
    cache.on_list(PRIORITY_CLASSES, [{"metadata": {"name": "inference", "resourceVersion": "1"}, "value": 125}])
    cache.on_list(
        QUEUES,
        [
            {
                "metadata": {"name": "q", "resourceVersion": "2"},
                "spec": {
                    "resources": {
                        "gpu": {"quota": 1, "limit": -1},
                        "cpu": {"quota": -1, "limit": -1},
                        "memory": {"quota": -1, "limit": -1},
                    }
                },
            }
        ],
    )
    cache.on_list(
        POD_GROUPS,
        [
            {
                "metadata": {"name": "pg", "namespace": "ns", "resourceVersion": "3"},
                "spec": {"minMember": 2, "queue": "q", "priorityClassName": "inference"},
            }
        ],
    )
    cache.on_list(PODS, [pod("a", 4, **{"pod-group-name": "pg"}), pod("b", 5)])
    deltas = cache.take_deltas()
    groups = {g.key: g for g in deltas.pod_groups_upserted}
    assert groups["ns/pg"].priority == 125 and not groups["ns/pg"].preemptible
    implicit = [g for g in groups.values() if g.name.startswith("pg-b")]
    assert len(implicit) == 1 and implicit[0].min_member == 1
    assert {p.pod_group for p in deltas.pods_upserted} == {"pg", implicit[0].name}


async def test_the_reflector_relists_after_410_and_skips_bookmarks() -> None:
    lists = [0]

    def handler(m: str, p: str, q: object, b: object) -> Response:
        lists[0] += 1
        return ok({"metadata": {"resourceVersion": str(10 * lists[0])}, "items": [node("n1", 10 * lists[0])]})

    api = FakeApi(handler)
    api.streams = [
        [
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "11"}}},
            {"type": "ADDED", "object": node("n2", 12)},
        ],
        KubeError(410, "Gone"),
        [{"type": "ERROR", "object": {"code": 410, "message": "too old"}}],
    ]
    cache = ClusterCache()
    reflector = Reflector(api, NODES, cache.on_list, cache.on_event, watch_seconds=1)  # type: ignore[arg-type]
    task = asyncio.create_task(reflector.run())
    for _ in range(200):
        await asyncio.sleep(0.005)
        if reflector.stats.gone >= 2:
            break
    reflector.stop()
    task.cancel()
    assert reflector.stats.gone >= 2 and lists[0] >= 3
    assert reflector.stats.events == 1  # the bookmark was not an event
    watches = [c for c in api.calls if c[0] == "WATCH"]
    assert watches[0][2]["resourceVersion"] == "10" and watches[0][2]["allowWatchBookmarks"] is True
