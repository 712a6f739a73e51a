"""pods/binding and pods/eviction as kube-apiserver answers them."""

from __future__ import annotations

import json

from tests.devcluster.conftest import ON_TEST_LOOP, Kube, eventually, pod

pytestmark = ON_TEST_LOOP
SUCCESS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def binding(name: str, node: str, uid: str | None = None) -> dict:
    meta = {"name": name, "namespace": "default", **({"uid": uid} if uid else {})}
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": meta,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


async def bind(kube: Kube, name: str, node: str, uid: str | None = None) -> tuple[int, dict]:
    # kubernetes-asyncio cannot parse the Status a binding answers with: read the raw response
    # (which also means a failure comes back as a status code instead of an ApiException).
    response = await kube.core.create_namespaced_pod_binding(
        name, "default", binding(name, node, uid), _preload_content=False
    )
    return response.status, json.loads(await response.read())


async def test_binding_sets_the_node_and_the_scheduled_condition(kube: Kube) -> None:
    created = await kube.core.create_namespaced_pod("default", pod("a"))
    status, body = await bind(kube, "a", "kwok-node-1", created.metadata.uid)
    assert status == 201 and body["kind"] == "Status" and body["status"] == "Success"
    bound = await kube.core.read_namespaced_pod("a", "default")
    assert bound.spec.node_name == "kwok-node-1"
    assert [(c.type, c.status) for c in bound.status.conditions if c.type == "PodScheduled"] == [
        ("PodScheduled", "True")
    ]


async def test_binding_with_another_uid_is_409_and_changes_nothing(kube: Kube) -> None:
    await kube.core.create_namespaced_pod("default", pod("a"))
    status, body = await bind(kube, "a", "kwok-node-1", "a-different-uid")
    assert status == 409
    assert body["reason"] == "Conflict" and "Precondition failed: UID in precondition" in body["message"]
    assert (await kube.core.read_namespaced_pod("a", "default")).spec.node_name is None


async def test_binding_twice_is_409_conflict(kube: Kube) -> None:
    created = await kube.core.create_namespaced_pod("default", pod("a"))
    assert (await bind(kube, "a", "kwok-node-1", created.metadata.uid))[0] == 201
    status, body = await bind(kube, "a", "kwok-node-2", created.metadata.uid)
    assert status == 409 and body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on pods/binding "a": pod a is already assigned to node "kwok-node-1"'
    )
    assert (await kube.core.read_namespaced_pod("a", "default")).spec.node_name == "kwok-node-1"


async def test_binding_a_missing_pod_is_404_and_a_missing_node_is_accepted(kube: Kube) -> None:
    assert (await bind(kube, "ghost", "kwok-node-1"))[0] == 404
    await kube.core.create_namespaced_pod("default", pod("a"))
    # kube-apiserver does not check the node; such a pod stays Pending until the node shows up.
    assert (await bind(kube, "a", "no-such-node"))[0] == 201
    assert (await kube.core.read_namespaced_pod("a", "default")).status.phase == "Pending"
    kube.cluster.create("", "v1", "nodes", {"metadata": {"name": "no-such-node"}})
    await eventually(lambda: kube.cluster.get("", "v1", "pods", "a", "default")["status"]["phase"] == "Running")


async def test_binding_a_terminating_pod_is_409(kube: Kube) -> None:
    held = pod("a")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    await kube.core.create_namespaced_pod("default", held)
    await kube.core.delete_namespaced_pod("a", "default")
    status, body = await bind(kube, "a", "kwok-node-1")
    assert status == 409 and "is being deleted" in body["message"]


async def test_a_gated_pod_cannot_be_bound_until_its_gates_are_removed(kube: Kube) -> None:
    gated = pod("a")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    await kube.core.create_namespaced_pod("default", gated)
    status, body = await bind(kube, "a", "kwok-node-1")
    assert status == 409 and "non-empty .spec.schedulingGates" in body["message"]
    await kube.core.patch_namespaced_pod("a", "default", {"spec": {"schedulingGates": None}})
    assert (await bind(kube, "a", "kwok-node-1"))[0] == 201


async def test_the_legacy_bindings_collection_binds_too(kube: Kube) -> None:
    await kube.core.create_namespaced_pod("default", pod("a"))
    response = await kube.core.create_namespaced_binding("default", binding("a", "kwok-node-3"), _preload_content=False)
    assert response.status == 201
    assert (await kube.core.read_namespaced_pod("a", "default")).spec.node_name == "kwok-node-3"


def eviction(name: str, grace: int | None = None) -> dict:
    body: dict = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}}
    if grace is not None:
        body["deleteOptions"] = {"gracePeriodSeconds": grace}
    return body


async def evict(kube: Kube, name: str, grace: int | None = None) -> tuple[int, dict]:
    response = await kube.core.create_namespaced_pod_eviction(
        name, "default", eviction(name, grace), _preload_content=False
    )
    return response.status, json.loads(await response.read())


async def running(kube: Kube, *names: str, labels: dict[str, str] | None = None) -> None:
    for name in names:
        await kube.core.create_namespaced_pod("default", pod(name, node="kwok-node-0", labels=labels))
    await eventually(
        lambda: all(kube.cluster.get("", "v1", "pods", n, "default")["status"]["phase"] == "Running" for n in names)
    )


async def pdb(kube: Kube, name: str, **spec: object) -> None:
    await kube.policy.create_namespaced_pod_disruption_budget(
        "default",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": "train"}}, **spec},
        },
    )


async def test_eviction_without_a_budget_deletes_gracefully(kube: Kube) -> None:
    await running(kube, "a")
    assert await evict(kube, "a", grace=10) == (201, SUCCESS)
    terminating = await kube.core.read_namespaced_pod("a", "default")
    assert terminating.metadata.deletion_timestamp and terminating.metadata.deletion_grace_period_seconds == 10
    await eventually(lambda: kube.cluster.get("", "v1", "pods", "a", "default") is None)  # grace capped to 0.2 s


async def test_eviction_blocked_by_a_budget_is_429_with_the_servers_status(kube: Kube) -> None:
    await running(kube, "a", "b", labels={"app": "train"})
    await pdb(kube, "keep-two", minAvailable=2)
    status, body = await evict(kube, "a")
    assert status == 429 and body["reason"] == "TooManyRequests"
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert body["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget keep-two needs 2 healthy pods and has 2 currently",
        }
    ]
    assert kube.cluster.get("", "v1", "pods", "a", "default")["metadata"].get("deletionTimestamp") is None


async def test_a_budget_allows_exactly_its_disruptions(kube: Kube) -> None:
    await running(kube, "a", "b", "c", labels={"app": "train"})
    await pdb(kube, "one-at-a-time", maxUnavailable=1)
    # A finalizer keeps "a" terminating however fast the simulated kubelet is, until the test lets go.
    kube.cluster.patch("", "v1", "pods", "a", {"metadata": {"finalizers": ["example.com/hold"]}}, "default")
    assert (await evict(kube, "a"))[0] == 201
    assert (await evict(kube, "b"))[0] == 429  # a is terminating and no longer counts as healthy
    kube.cluster.patch("", "v1", "pods", "a", {"metadata": {"finalizers": None}}, "default")
    await eventually(lambda: kube.cluster.get("", "v1", "pods", "a", "default") is None)
    # b and c are left, both healthy, and one of them may go: the status says so once it is refreshed.
    await eventually(
        lambda: (
            kube.cluster.get("policy", "v1", "poddisruptionbudgets", "one-at-a-time", "default")
            .get("status", {})
            .get("disruptionsAllowed")
            == 1
        )
    )
    kube.cluster.patch("", "v1", "pods", "b", {"metadata": {"finalizers": ["example.com/hold"]}}, "default")
    assert (await evict(kube, "b"))[0] == 201
    assert (await evict(kube, "c"))[0] == 429  # b is terminating: c is the one healthy pod the budget needs
    kube.cluster.patch("", "v1", "pods", "b", {"metadata": {"finalizers": None}}, "default")


async def test_pending_pods_and_unselected_pods_ignore_budgets(kube: Kube) -> None:
    await pdb(kube, "all-of-them", minAvailable="100%")
    await kube.core.create_namespaced_pod("default", pod("pending", labels={"app": "train"}))
    assert (await evict(kube, "pending"))[0] == 201
    assert kube.cluster.get("", "v1", "pods", "pending", "default") is None  # unbound: deleted at once
    await running(kube, "other", labels={"app": "serve"})
    assert (await evict(kube, "other"))[0] == 201
    assert (await evict(kube, "ghost"))[0] == 404
