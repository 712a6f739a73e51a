"""The cache's deltas follow the changes: only touched PodGroups are resolved, relists delete
what is gone, holds keep a pod from the coordinator, and the newest event wins everywhere."""

from __future__ import annotations

from typing import Any

from k8s_adapter.cache import ClusterCache
from k8s_adapter.kinds import POD_GROUPS, PODS, PRIORITY_CLASSES
from kai_ray.model import PodState
from pod_grouper.live import PodGrouper
from tests.adapter.fake_api import FakeApi, ok
from tests.adapter.test_cache_reflector import pod

RV = iter(range(100, 10**9))


def versioned(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["resourceVersion"] = str(next(RV))
    return obj


def group(name: str, queue: str = "q", min_member: int = 1, **spec: Any) -> dict[str, Any]:
    return versioned(
        {"metadata": {"name": name, "namespace": "ns"}, "spec": {"minMember": min_member, "queue": queue, **spec}}
    )


def member(name: str, group_name: str, **extra: Any) -> dict[str, Any]:
    obj = pod(name, 0, **{"pod-group-name": group_name, **extra})
    obj["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    return versioned(obj)


def test_a_changed_pod_resolves_only_its_own_group() -> None:
    cache = ClusterCache()
    cache.on_list(POD_GROUPS, [group(f"g{i}") for i in range(50)])
    cache.on_list(PODS, [member(f"p{i}", f"g{i}") for i in range(50)])
    first = cache.take_deltas()
    assert len(first.pod_groups_upserted) == 50 and len(first.pods_upserted) == 50
    resolved: list[str] = []
    original = cache.membership.index._resolve

    def counting(key: str, *args: Any) -> Any:
        resolved.append(key)
        return original(key, *args)

    cache.membership.index._resolve = counting  # type: ignore[method-assign]
    running = member("p7", "g7")
    running["spec"]["nodeName"], running["status"]["phase"] = "n1", "Running"
    cache.on_event(PODS, "MODIFIED", running)
    deltas = cache.take_deltas()
    assert [p.key for p in deltas.pods_upserted] == ["ns/p7"] and deltas.pods_upserted[0].state is PodState.RUNNING
    assert resolved == ["ns/g7"] and deltas.pod_groups_upserted == ()  # resolved, unchanged, not re-sent
    cache.on_event(PODS, "DELETED", running)
    assert cache.take_deltas().pods_removed == ("ns/p7",)


def test_a_group_without_queue_follows_its_pods_label_and_a_priority_class_touches_all() -> None:
    cache = ClusterCache()
    cache.on_list(POD_GROUPS, [group("g", queue="")])
    cache.on_list(PODS, [member("a", "g")])
    [resolved] = cache.take_deltas().pod_groups_upserted
    assert resolved.queue == "q"  # the members' kai.scheduler/queue label
    cache.on_event(
        PRIORITY_CLASSES, "ADDED", versioned({"metadata": {"name": "low"}, "value": 10, "globalDefault": True})
    )
    [again] = cache.take_deltas().pod_groups_upserted
    assert again.priority == 10 and again.preemptible


def test_a_relist_removes_what_vanished_and_keeps_what_came_after_it() -> None:
    cache = ClusterCache()
    cache.on_list(PODS, [member("a", "g"), member("b", "g")])
    cache.take_deltas()
    cache.on_list(PODS, [member("a", "g")])  # b was deleted while the watch was down
    cache.on_event(PODS, "ADDED", member("c", "g"))  # c came after the list
    deltas = cache.take_deltas()
    assert deltas.pods_removed == ("ns/b",) and {p.key for p in deltas.pods_upserted} == {"ns/a", "ns/c"}


def test_the_newest_event_wins_before_and_after_it_is_applied() -> None:
    cache = ClusterCache()
    cache.on_event(PODS, "ADDED", member("a", "g"))
    assert cache.pod_now("ns/a") is not None and cache.pod_now("ns/a").state is PodState.PENDING  # type: ignore[union-attr]
    cache.on_event(PODS, "DELETED", member("a", "g"))
    assert cache.pod_now("ns/a") is None  # not applied yet, but known
    deltas = cache.take_deltas()
    assert not deltas.pods_upserted and cache.pod_now("ns/a") is None


def test_a_held_pod_leaves_the_coordinator_until_its_time_or_its_bind() -> None:
    cache = ClusterCache()
    cache.on_list(PODS, [member("a", "g"), member("b", "g")])
    cache.take_deltas(now=0.0)
    cache.hold_back("ns/a", until=10.0, why="500")
    cache.hold_back("ns/b", until=10.0, why="500")
    held = cache.take_deltas(now=1.0)
    assert set(held.pods_removed) == {"ns/a", "ns/b"} and set(cache.held_view) == {"ns/a", "ns/b"}
    bound = member("b", "g")
    bound["spec"]["nodeName"] = "n1"
    cache.on_event(PODS, "MODIFIED", bound)  # bound after all (another replica, a late success)
    assert [p.key for p in cache.take_deltas(now=2.0).pods_upserted] == ["ns/b"]
    assert [p.key for p in cache.take_deltas(now=10.0).pods_upserted] == ["ns/a"]
    assert not cache.held_view


def test_invalid_objects_are_problems_until_fixed_or_gone() -> None:
    cache = ClusterCache()
    bad = member("a", "g", **{"gpu-fraction": "abc"})
    cache.on_event(PODS, "ADDED", bad)
    assert not cache.take_deltas().pods_upserted
    [problem] = cache.problems_view.values()
    assert problem.skipped and problem.pod_group == "ns/g" and "'abc'" in problem.text
    cache.on_event(PODS, "MODIFIED", member("a", "g", **{"gpu-fraction": "0.5"}))
    assert [p.key for p in cache.take_deltas().pods_upserted] == ["ns/a"] and not cache.problems_view
    cache.on_event(POD_GROUPS, "ADDED", group("g", min_member=1, stalenessGracePeriod="soon"))
    cache.take_deltas()
    assert "spec.stalenessGracePeriod: bad duration 'soon'" in cache.problems_view[("PodGroup", "ns/g")].text
    cache.on_event(POD_GROUPS, "DELETED", group("g"))
    cache.take_deltas()
    assert not cache.problems_view


async def test_the_pod_grouper_forgets_pods_that_left_its_work_list() -> None:
    api = FakeApi(lambda m, p, q, b: ok({"metadata": {}}))
    grouper = PodGrouper(api)  # type: ignore[arg-type]
    pods = [versioned(pod(f"p{i}", 0)) for i in range(3)]
    assert await grouper.group(pods) == 3 and len(grouper.done) == 3
    assert await grouper.group(pods) == 0  # annotated already; the watch has not shown it yet
    assert await grouper.group(pods[:1]) == 0 and len(grouper.done) == 1
    assert await grouper.group([]) == 0 and not grouper.done


def test_a_bare_pod_whose_own_group_object_is_deleted_stays_in_an_implicit_group() -> None:
    """A bound bare pod names the group the pod grouper made for it; that PodGroup is deleted and
    the pod keeps running. It is grouped as if it named none (as a restart, or a snapshot of the
    same objects, groups it): its queue still counts it, rather than a group that is gone."""
    cache = ClusterCache()
    cache.on_list(POD_GROUPS, [group("pg-p-u-p", queue="q")])
    running = member("p", "pg-p-u-p")
    running["spec"]["nodeName"], running["status"]["phase"] = "n1", "Running"
    cache.on_list(PODS, [running])
    first = cache.take_deltas()
    assert [g.key for g in first.pod_groups_upserted] == ["ns/pg-p-u-p"]
    cache.on_event(POD_GROUPS, "DELETED", group("pg-p-u-p", queue="q"))
    deltas = cache.take_deltas()
    assert deltas.pod_groups_removed == ()  # the same group, made from the pod: nothing to send
    assert all(g.key == "ns/pg-p-u-p" and g.queue == "q" for g in deltas.pod_groups_upserted)
    # A pod that names another group (not its own) is left where it was: waiting for that object.
    cache.on_list(POD_GROUPS, [group("g", queue="q")])
    cache.on_list(PODS, [running, member("other", "g")])
    cache.take_deltas()
    cache.on_event(POD_GROUPS, "DELETED", group("g", queue="q"))
    assert cache.take_deltas().pod_groups_removed == ("ns/g",)


def test_a_bare_pods_implicit_group_follows_its_labels_as_they_change() -> None:
    """The implicit group of a pod that names none is worked out once per version of the pod: a
    relabelled pod moves its group to the new queue and priority class, and the old ones are gone."""
    cache = ClusterCache()
    cache.on_list(PRIORITY_CLASSES, [versioned({"metadata": {"name": "high"}, "value": 500})])
    bare = versioned(pod("solo", 0))
    cache.on_list(PODS, [bare])
    [first] = cache.take_deltas().pod_groups_upserted
    assert first.queue == "q" and first.priority_class_name is None
    relabelled = versioned(pod("solo", 0))
    relabelled["metadata"]["labels"] = {"kai.scheduler/queue": "other", "priorityClassName": "high"}
    cache.on_event(PODS, "MODIFIED", relabelled)
    [moved] = cache.take_deltas().pod_groups_upserted
    assert moved.key == first.key and moved.queue == "other"
    assert moved.priority_class_name == "high" and moved.priority == 500
    cache.on_event(PODS, "DELETED", relabelled)
    assert cache.take_deltas().pod_groups_removed == (first.key,)


def test_what_is_read_ahead_comes_with_the_next_deltas_once() -> None:
    """Pages read into records before there is a coordinator reach it with the first deltas, with
    what came after them, and not again; a hold taken meanwhile still keeps its pod back."""
    from k8s_adapter.kinds import NODES
    from tests.adapter.test_cache_reflector import node

    cache = ClusterCache()
    cache.on_page(PODS, [versioned(pod("early", 0)), versioned(pod("held", 0))])
    cache.hold_back("ns/held", float("inf"), "its bind keeps failing")
    cache.read_ahead()
    assert sorted(cache.pods) == ["ns/early", "ns/held"] and cache.pending_events() == 0
    cache.on_list(NODES, [node("n1", 5)])
    cache.on_event(PODS, "ADDED", versioned(pod("late", 0)))
    deltas = cache.take_deltas()
    assert [n.name for n in deltas.nodes_upserted] == ["n1"]
    assert sorted(p.key for p in deltas.pods_upserted) == ["ns/early", "ns/late"]
    assert "ns/held" in cache.held_view
    again = cache.take_deltas()
    assert again.pods_upserted == () and again.nodes_upserted == ()


def _running(name: str, **labels: str) -> dict[str, Any]:
    obj = member(name, "g")
    obj["spec"]["nodeName"], obj["status"]["phase"] = "n1", "Running"
    obj["metadata"]["uid"] = f"uid-{name}"
    obj["metadata"].setdefault("labels", {}).update(labels)
    return obj


def test_an_evicted_pod_reads_releasing_until_the_watch_shows_it_leaving() -> None:
    cache = ClusterCache()
    cache.on_list(PODS, [_running("v1"), _running("v2")])
    cache.take_deltas()
    cache.evicting(["ns/v1", "ns/v2"])
    [first, second] = sorted(cache.take_deltas().pods_upserted, key=lambda p: p.key)
    assert first.state is second.state is PodState.RELEASING
    now = cache.pod_now("ns/v1")
    assert now is not None and now.state is PodState.RUNNING  # the eviction's recheck sees the truth
    # A change that is not the deletion (a label) keeps the pod releasing.
    cache.on_event(PODS, "MODIFIED", versioned(_running("v1", touched="yes")))
    assert [p.state for p in cache.take_deltas().pods_upserted] == [PodState.RELEASING]
    # v2's eviction was not taken (a budget said no): it runs again, as the watch says.
    cache.evicting(["ns/v2"], sent=False)
    assert [(p.key, p.state) for p in cache.take_deltas().pods_upserted] == [("ns/v2", PodState.RUNNING)]
    # The watch brings v1's deletion: gone, and nothing is left marked.
    cache.on_event(PODS, "DELETED", _running("v1"))
    assert cache.take_deltas().pods_removed == ("ns/v1",)
    assert cache.expected.truth == {}


def test_an_eviction_of_a_pod_that_is_not_running_marks_nothing() -> None:
    cache = ClusterCache()
    cache.on_list(PODS, [member("waiting", "g")])
    cache.take_deltas()
    cache.evicting(["ns/waiting", "ns/unknown"])
    assert cache.take_deltas().pods_upserted == ()
    assert cache.expected.truth == {}


def test_an_owner_reference_that_is_not_an_object_is_passed_over() -> None:
    # The API server validates ownerReferences; a watch (or a test double) that hands over
    # something else must not stop the deltas for every other pod.
    cache = ClusterCache()
    owned = versioned(pod("worker", 0))
    owned["metadata"]["ownerReferences"] = [
        "not a reference",
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u-train", "controller": True},
    ]
    cache.on_list(PODS, [owned, versioned(pod("other", 0))])
    groups = {p.key: p.pod_group for p in cache.take_deltas().pods_upserted}
    assert groups == {"ns/other": "pg-other-u-other", "ns/worker": "pg-train-u-train"}  # grouped by its Job
