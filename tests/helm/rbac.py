"""RBAC: the chart grants exactly what k8s_adapter does against the API server, nothing more.

The adapter's components run against a recording fake API; every request becomes the RBAC
permission it needs (verb, API group, resource[/subresource]). For each value set, the rules
the chart renders must allow all of them, and must allow nothing the adapter never asks for.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from typing import Any

from coordinator import JobClock
from k8s_adapter.api import KubeError, Response
from k8s_adapter.binder import Binder, BindRequest, FractionBind
from k8s_adapter.claims import ClaimBind, ClaimChange, ClaimWriter
from k8s_adapter.evictor import Evictor, EvictRequest
from k8s_adapter.job_clocks import JobClockWriter
from k8s_adapter.kinds import DRA_WATCHED, OWNER_KINDS, WATCHED, WORKLOAD_API_WATCHED, Kind
from k8s_adapter.reflector import Reflector
from k8s_adapter.status import StatusWriter
from k8s_adapter.usage_store import QueueUsageStore
from pod_grouper.live import PodGrouper
from tests.adapter.fake_api import FakeApi, ok
from tests.helm.chart import NAMESPACE, RELEASE, find, one, render

Permission = tuple[str, str, str]  # (API group, resource or resource/subresource, verb)

# The brief's least-privilege list, narrowed to what the adapter uses: with every optional grant
# off, this is the whole ClusterRole.
CORE: set[Permission] = {
    *(("", "nodes", v) for v in ("get", "list", "watch")),
    *(("", "pods", v) for v in ("get", "list", "watch")),
    ("", "pods/binding", "create"),
    ("", "pods/eviction", "create"),
    ("", "pods/status", "patch"),  # PodScheduled=False on pending pods; DisruptionTarget before an eviction
    *(("scheduling.run.ai", r, v) for r in ("queues", "podgroups") for v in ("get", "list", "watch")),
    ("scheduling.run.ai", "podgroups/status", "patch"),
    ("scheduling.run.ai", "podgroups", "patch"),
    ("scheduling.run.ai", "queues/status", "patch"),
    ("", "events", "create"),
    ("", "events", "patch"),  # an unchanged situation raises its Event's count
    *(
        ("scheduling.k8s.io", r, v)
        for r in ("priorityclasses", "podgroups", "workloads")
        for v in ("get", "list", "watch")
    ),
    *(("kai.scheduler", "topologies", v) for v in ("get", "list", "watch")),
}
LEASE: set[Permission] = {("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")}


def permission(method: str, path: str, query: Any = None) -> Permission:
    """The RBAC attributes of one request path, as the API server's request-info resolver finds them."""
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    resource = "/".join([rest[0], *rest[2:3]])
    named = len(rest) > 1
    verb = {
        "GET": "get" if named else "list",
        "WATCH": "watch",
        "POST": "create",
        "PATCH": "patch",
        "PUT": "update",
        "DELETE": "delete" if named else "deletecollection",
    }[method]
    return group, resource, verb


def recorded(api: FakeApi) -> set[Permission]:
    return {permission(method, path) for method, path, _ in api.calls}


async def _watching() -> set[Permission]:
    """Each informer: one list, then a watch."""
    api = FakeApi(lambda m, p, q, b: ok({"items": [], "metadata": {"resourceVersion": "1"}}))
    await _informers(api, (*WATCHED, *(versions[0] for versions in WORKLOAD_API_WATCHED)))
    return recorded(api)


async def _informers(api: FakeApi, kinds: Sequence[Kind]) -> None:
    """Run one reflector per kind until each has listed and started watching."""
    reflectors = [Reflector(api, kind, lambda k, items: None, lambda k, e, o: None) for kind in kinds]  # type: ignore[arg-type]
    tasks = [asyncio.create_task(r.run()) for r in reflectors]
    while not all(r.stats.watches for r in reflectors):
        await asyncio.sleep(0.01)
    for reflector, task in zip(reflectors, tasks, strict=True):
        reflector.stop()
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _binding(gpu_groups: tuple[str, ...]) -> set[Permission]:
    """A bind, and a bind answered 409 (the binder then reads the pod to see where it went)."""

    def handler(method: str, path: str, query: object, body: object) -> Response:
        if path.endswith("/taken/binding"):
            raise KubeError(409, "Conflict")
        return ok({"metadata": {"uid": "u"}, "spec": {"nodeName": "n1"}})

    api = FakeApi(handler)
    await Binder(api, base_delay=0).bind_all(
        [
            BindRequest("ns/p", "u", "n1", gpu_groups),  # type: ignore[arg-type]
            BindRequest("ns/taken", "u", "n1", gpu_groups),
        ]
    )
    return recorded(api)


RESERVATIONS = "/api/v1/namespaces/kai-resource-reservation/pods"


async def _sharing() -> tuple[set[Permission], set[Permission]]:
    """Fraction binds, one that succeeds and one rolled back after its binding is refused, and the
    clean-up of a group nobody uses: (cluster-wide, reservation-namespace) permissions."""
    reservation = {
        "metadata": {
            "name": "gpu-reservation-x",
            "namespace": "kai-resource-reservation",
            "labels": {"runai-gpu-group": "g1"},
            "annotations": {"run.ai/reserve_for_gpu_index": "3"},
        },
    }
    sharer = {
        "metadata": {"name": "old", "namespace": "ns", "labels": {"runai-gpu-group": "g2"}},
        "status": {"phase": "Running"},
    }

    def handler(method: str, path: str, query: Any, body: Any) -> Response:
        selector = (query or {}).get("labelSelector", "")
        if method == "GET" and path == RESERVATIONS:
            return ok({"items": []})  # no reservation pod yet: the binder creates one
        if method == "GET" and path == "/api/v1/pods":
            return ok({"items": [reservation] if "g1" in selector else [sharer] if "g2" in selector else []})
        if method == "GET" and path.startswith(RESERVATIONS + "/"):
            return ok(reservation)
        if method == "GET" and "/pods/" in path:
            return ok(
                {
                    "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"runai-gpu-group": "g1"}},
                    "spec": {"containers": [{"name": "c"}]},
                }
            )
        if method == "POST" and path.endswith("/configmaps") and "evar" in body["metadata"]["name"]:
            raise KubeError(409, "AlreadyExists")
        if method == "POST" and path.endswith("/refused/binding"):
            raise KubeError(403, "Forbidden")
        return ok({"metadata": {"name": "x"}, "data": {}})

    api = FakeApi(handler)
    binder = Binder(api, attempts=1, base_delay=0)  # type: ignore[arg-type]
    await binder.bind_all(
        [
            BindRequest("ns/p", "u", "n1", ("g1",), FractionBind("0.50")),
            BindRequest("ns/refused", "u", "n1", ("g1",), FractionBind("0.50")),
        ]
    )
    await binder.reservations.sync_groups(["g2"])
    cluster = {permission(m, p) for m, p, _ in api.calls if not (m == "POST" and p == RESERVATIONS)}
    return cluster, {permission(m, p) for m, p, _ in api.calls if m == "POST" and p == RESERVATIONS}


async def _dra() -> set[Permission]:
    """The DRA informers, and a claim written for a bind then given back by a rollback."""
    claim = {"metadata": {"name": "c", "namespace": "ns"}, "status": {}}
    api = FakeApi(lambda m, p, q, b: ok({"items": [], "metadata": {"resourceVersion": "1"}, **claim}))
    await _informers(api, DRA_WATCHED)
    writer = ClaimWriter(api)  # type: ignore[arg-type]
    done: list[ClaimChange] = []
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}}
    await writer.reserve(pod, (ClaimBind("c", {"devices": {"results": []}}),), done)
    await writer.release("ns", "p", "u", done)
    return recorded(api)


async def _evicting(mode: str) -> set[Permission]:
    api = FakeApi(lambda m, p, q, b: ok())
    await Evictor(api, mode=mode).evict_all([EvictRequest("ns/p", "reclaim", "ns/big")])  # type: ignore[arg-type]
    return recorded(api)


async def _explaining() -> set[Permission]:
    """A cycle's conditions, events and status; a repeated event; bind and eviction events."""
    from k8s_adapter.status import Eviction
    from tests.adapter.status_scenario import scenario

    api = FakeApi(lambda m, p, q, b: ok())
    writer = StatusWriter(api, report_after=0, repeat_after=0)  # type: ignore[arg-type]
    outcome, cache = scenario()
    await writer.publish(outcome, cache)
    await writer.publish(outcome, cache)  # the same situation again: the Events' counts go up
    await writer.bound([("ns/a", "u", "n1", True, ""), ("ns/b", "u", "n1", False, "500")])
    await writer.evicted([Eviction("ns/v", "u", "ns/pg", "u-pg", "reclaim", "ns/big", "evicted", 1)])
    return recorded(api)


async def _keeping_clocks() -> set[Permission]:
    api = FakeApi(lambda m, p, q, b: ok())
    await JobClockWriter(api).write({"ns/pg": JobClock(1.0, None, 2.0)})  # type: ignore[arg-type]
    return recorded(api)


async def _keeping_usage() -> set[Permission]:
    api = FakeApi(lambda m, p, q, b: ok({"items": [], "status": {"usageHistory": {}}}))
    store = QueueUsageStore(api)  # type: ignore[arg-type]
    await store.load()
    await store.save({"q": {"version": 1}})
    return recorded(api)


async def _grouping() -> set[Permission]:
    """One pod under each owner kind the grouper knows, so it reads every kind of owner once."""
    api = FakeApi(lambda m, p, q, b: ok({"metadata": {"name": "owner", "uid": "o"}, "spec": {}}))
    pods = [
        {
            "metadata": {
                "name": f"p{i}",
                "namespace": "ns",
                "ownerReferences": [
                    {"apiVersion": api_version, "kind": kind, "name": "owner", "uid": "o", "controller": True}
                ],
            }
        }
        for i, (api_version, kind) in enumerate(OWNER_KINDS)
    ]
    await PodGrouper(api).group(pods)  # type: ignore[arg-type]
    return recorded(api)


async def _leasing() -> set[Permission]:
    """The Lease lock kubernetes-asyncio's leader election uses: read, take, renew."""
    from kubernetes_asyncio import client
    from kubernetes_asyncio.leaderelection.leaderelectionrecord import LeaderElectionRecord

    from k8s_adapter.leader import _quiet_lease_lock

    LeaseLock = _quiet_lease_lock()  # the lock kai-ray runs: the library's, with one-line conflicts

    verbs = {
        "read": "get",
        "list": "list",
        "create": "create",
        "replace": "update",
        "patch": "patch",
        "delete": "delete",
    }
    used: set[Permission] = set()

    class RecordingLeaseApi:
        """Stands in for CoordinationV1Api: notes the verb of every call the lock makes."""

        def __getattr__(self, name: str) -> Any:
            async def call(*args: Any, **kwargs: Any) -> Any:
                used.add(("coordination.k8s.io", "leases", verbs[name.split("_", 1)[0]]))
                return client.V1Lease(spec=client.V1LeaseSpec(holder_identity="other", lease_duration_seconds=15))

            return call

    lock = LeaseLock("kai-ray", NAMESPACE, "me", api_client=object())  # type: ignore[arg-type]
    lock.api_instance = RecordingLeaseApi()  # type: ignore[assignment]
    record = LeaderElectionRecord("me", "15", "2026-01-01 00:00:00.000000", "2026-01-01 00:00:00.000000")
    assert (await lock.get("kai-ray", NAMESPACE))[0]
    assert await lock.create("kai-ray", NAMESPACE, record)
    assert await lock.update("kai-ray", NAMESPACE, record)
    return used


@functools.cache
def adapter_requests() -> dict[str, frozenset[Permission]]:
    async def everything() -> dict[str, frozenset[Permission]]:
        return {
            name: frozenset(await scenario)
            for name, scenario in {
                "watch": _watching(),
                "bind": _binding(()),
                "bind-fraction": _binding(("g1",)),
                "evict": _evicting("eviction"),
                "evict-delete": _evicting("delete"),
                "explain": _explaining(),
                "clocks": _keeping_clocks(),
                "usage": _keeping_usage(),
                "group": _grouping(),
                "lease": _leasing(),
                "dra": _dra(),
            }.items()
        }

    used = asyncio.run(everything())
    cluster, reservations = asyncio.run(_sharing())
    return {**used, "share": frozenset(cluster), "share-reservations": frozenset(reservations)}


def needed(values: dict[str, Any]) -> tuple[set[Permission], set[Permission]]:
    """(cluster-wide, release-namespace) permissions the adapter uses with these values."""
    used = adapter_requests()
    eviction = values.get("eviction", {})
    cluster = set(used["watch"] | used["bind"] | used["explain"] | used["clocks"] | used["usage"])
    cluster |= used["evict-delete" if eviction.get("mode") == "delete" else "evict"]
    if values.get("podGrouper", {}).get("enabled", True):
        cluster |= used["group"]
    if values.get("gpuSharing", {}).get("enabled"):
        cluster |= used["share"]
    if values.get("dra", {}).get("enabled"):
        cluster |= used["dra"]
    # get shows nothing that list does not, and the API's convention grants the two together.
    cluster |= {(g, r, "get") for g, r, v in cluster if v == "list"}
    namespaced = set(used["lease"]) if values.get("leaderElection", {}).get("enabled", True) else set()
    return cluster, namespaced


def grants(rules: list[dict[str, Any]]) -> set[Permission]:
    for rule in rules:
        assert not rule.get("resourceNames") and not rule.get("nonResourceURLs"), rule
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], f"a wildcard: {rule}"
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def rendered_grants(values: dict[str, Any]) -> tuple[set[Permission], set[Permission]]:
    """The scheduler's grants: its ClusterRole (named like the release) and its lease Role (in the
    release namespace; the reservation namespace's Roles are ``reservation_grants``)."""
    objects = render(values)
    roles = [r for r in find(objects, "Role") if r["metadata"]["namespace"] == NAMESPACE]
    return grants(one(objects, "ClusterRole", RELEASE)["rules"]), grants(roles[0]["rules"]) if roles else set()


def reservation_grants(values: dict[str, Any]) -> dict[str, set[Permission]]:
    """Roles in the reservation namespace, by the service account they are bound to."""
    objects = render(values)
    roles = {
        r["metadata"]["name"]: grants(r["rules"])
        for r in find(objects, "Role")
        if r["metadata"]["namespace"] == "kai-resource-reservation"
    }
    out: dict[str, set[Permission]] = {}
    for binding in find(objects, "RoleBinding"):
        if binding["metadata"]["namespace"] == "kai-resource-reservation":
            [subject] = binding["subjects"]
            out[subject["name"]] = roles[binding["roleRef"]["name"]]
    return out


VALUE_SETS = {
    "defaults": {},
    "every-option-off": {"podGrouper": {"enabled": False}, "replicas": 1, "leaderElection": {"enabled": False}},
    "every-option-on": {"gpuSharing": {"enabled": True}, "dra": {"enabled": True}},
    "delete-eviction": {"eviction": {"mode": "delete"}},
    "fractions-without-grouper": {"gpuSharing": {"enabled": True}, "podGrouper": {"enabled": False}},
    "usage-accounting": {"scheduler": {"config": {"usageDBConfig": {"clientType": "accounting"}}}},
}
