"""Defaults the snapshot loader applies, as KAI applies them (docs/architecture.md#snapshot-input)."""

from __future__ import annotations

import pytest

from kai_ray.io.snapshot_loader import snapshot_from_documents
from kai_ray.model import UNLIMITED, ClusterSnapshot, PodGroup, Queue
from tests import manifests as m


def load(*objects: m.Manifest) -> ClusterSnapshot:
    return snapshot_from_documents(list(objects))


def queue_named(snapshot: ClusterSnapshot, name: str) -> Queue:
    return next(q for q in snapshot.queues if q.name == name)


def group_named(snapshot: ClusterSnapshot, name: str) -> PodGroup:
    return next(g for g in snapshot.pod_groups if g.name == name)


# ------------------------------------------------------------------ queues


def test_a_queue_without_priority_gets_100() -> None:
    assert queue_named(load(m.queue("q")), "q").priority == 100
    assert queue_named(load(m.queue("q", priority=7)), "q").priority == 7


def test_queue_memory_is_in_millions_of_bytes_and_cpu_in_millicores() -> None:
    resources = {
        "gpu": {"quota": 2.5, "overQuotaWeight": 3, "limit": 4},
        "cpu": {"quota": 8000, "overQuotaWeight": 1, "limit": 16000},
        "memory": {"quota": 1000, "overQuotaWeight": 1, "limit": 2500},
    }
    q = queue_named(load(m.queue("q", resources=resources)), "q")
    assert (q.gpu.quota, q.gpu.over_quota_weight, q.gpu.limit) == (2.5, 3, 4)
    assert (q.cpu.quota, q.cpu.limit) == (8000, 16000)
    assert (q.memory.quota, q.memory.limit) == (1_000_000_000, 2_500_000_000)


def test_minus_one_means_unlimited_and_is_not_scaled() -> None:
    resources = {r: {"quota": -1, "overQuotaWeight": 1, "limit": -1} for r in ("gpu", "cpu", "memory")}
    q = queue_named(load(m.queue("q", resources=resources)), "q")
    assert q.memory.quota == q.memory.limit == UNLIMITED
    assert q.gpu.quota == q.cpu.limit == UNLIMITED


def test_an_unset_limit_and_weight_are_zero_as_in_kai_and_the_limit_gets_a_warning() -> None:
    snapshot = load(m.queue("q", resources={"gpu": {"quota": 2}}))
    q = queue_named(snapshot, "q")
    assert q.gpu.limit == 0 and q.gpu.quota == 2 and q.gpu.over_quota_weight == 0
    assert any("spec.resources.gpu.limit is unset" in w for w in snapshot.report.warnings)


def test_queue_creation_time_orders_ties() -> None:
    snapshot = load(m.queue("old", created="2026-01-01T00:00:00Z"), m.queue("new", created="2026-01-02T00:00:00Z"))
    assert queue_named(snapshot, "old").created < queue_named(snapshot, "new").created


# ------------------------------------------------------------------ priority and preemptibility


def test_priority_comes_from_the_named_priority_class() -> None:
    snapshot = load(m.priority_class("inference", 125), m.pod_group("g", "q", priority_class_name="inference"))
    assert group_named(snapshot, "g").priority == 125


def test_without_a_priority_class_the_priority_is_50_and_the_job_preemptible() -> None:
    group = group_named(load(m.pod_group("g", "q")), "g")
    assert group.priority == 50 and group.preemptible


def test_a_missing_priority_class_falls_back_to_50_with_a_warning() -> None:
    snapshot = load(m.pod_group("g", "q", priority_class_name="nope"))
    assert group_named(snapshot, "g").priority == 50
    assert any("PriorityClass 'nope' does not exist" in w for w in snapshot.report.warnings)


def test_the_global_default_priority_class_replaces_the_fallback() -> None:
    snapshot = load(m.priority_class("everyone", 200, global_default=True), m.pod_group("g", "q"))
    group = group_named(snapshot, "g")
    assert group.priority == 200 and not group.preemptible


@pytest.mark.parametrize(("value", "preemptible"), [(99, True), (100, False), (50, True), (125, False)])
def test_preemptibility_follows_the_priority_value(value: int, preemptible: bool) -> None:
    snapshot = load(m.priority_class("pc", value), m.pod_group("g", "q", priority_class_name="pc"))
    assert group_named(snapshot, "g").preemptible is preemptible


@pytest.mark.parametrize(
    ("value", "setting", "preemptible"),
    [
        (125, "preemptible", True),
        (50, "non-preemptible", False),
    ],
)
def test_spec_preemptibility_overrides_the_priority(value: int, setting: str, preemptible: bool) -> None:
    snapshot = load(
        m.priority_class("pc", value), m.pod_group("g", "q", priority_class_name="pc", preemptibility=setting)
    )
    group = group_named(snapshot, "g")
    assert group.preemptible is preemptible and group.priority == value


def test_the_preemptibility_label_on_a_pod_group_counts_too() -> None:
    manifest = m.pod_group("g", "q")
    manifest["metadata"]["labels"] = {"kai.scheduler/preemptibility": "non-preemptible"}
    assert not group_named(load(manifest), "g").preemptible


@pytest.mark.parametrize("value", [50, 125])
def test_a_semi_preemptible_pod_group_protects_its_minimum_whatever_its_priority(value: int) -> None:
    snapshot = load(
        m.priority_class("pc", value),
        m.pod_group("g", "q", min_member=2, priority_class_name="pc", preemptibility="semi-preemptible"),
    )
    group = group_named(snapshot, "g")
    assert group.semi_preemptible and not group.preemptible and group.priority == value
    assert snapshot.report.warnings == ()


def test_the_semi_preemptible_label_on_a_pod_group_counts_too() -> None:
    manifest = m.pod_group("g", "q")
    manifest["metadata"]["labels"] = {"kai.scheduler/preemptibility": "semi-preemptible"}
    assert group_named(load(manifest), "g").semi_preemptible


def test_an_invalid_preemptibility_label_on_a_pod_group_is_ignored_with_a_warning() -> None:
    manifest = m.pod_group("g", "q")
    manifest["metadata"]["labels"] = {"kai.scheduler/preemptibility": "sometimes"}
    snapshot = load(manifest)
    group = group_named(snapshot, "g")  # the group is kept: its priority decides
    assert group.preemptible and not group.semi_preemptible
    assert snapshot.report.warnings == (
        "PodGroup team/g: metadata.labels.kai.scheduler/preemptibility: ignored 'sometimes' "
        "(must be one of preemptible, non-preemptible, semi-preemptible)",
    )


def test_semi_preemptible_with_a_sub_group_tree_runs_non_preemptible_with_a_warning() -> None:
    manifest = m.pod_group("g", "q", preemptibility="semi-preemptible")
    del manifest["spec"]["minMember"]
    manifest["spec"]["minSubGroup"] = 1
    manifest["spec"]["subGroups"] = [{"name": "a", "minMember": 2}, {"name": "b", "minMember": 2}]
    snapshot = load(manifest)
    group = group_named(snapshot, "g")
    assert not group.semi_preemptible and not group.preemptible
    assert snapshot.report.warnings == (
        "PodGroup team/g: semi-preemptible with minSubGroup or nested sub-groups is not supported; "
        "it runs as non-preemptible",
    )


def test_semi_preemptible_with_a_minimum_of_no_pods_is_preemptible() -> None:
    snapshot = load(m.pod_group("g", "q", min_member=0, preemptibility="semi-preemptible"))
    group = group_named(snapshot, "g")
    assert group.preemptible and not group.semi_preemptible


def test_semi_preemptible_with_sub_groups_side_by_side_protects_each_minimum() -> None:
    manifest = m.pod_group("g", "q", min_member=3, preemptibility="semi-preemptible")
    manifest["spec"]["subGroups"] = [{"name": "leader", "minMember": 1}, {"name": "workers", "minMember": 2}]
    snapshot = load(manifest)
    assert group_named(snapshot, "g").semi_preemptible and snapshot.report.warnings == ()


# ------------------------------------------------------------------ queue of a job


def test_a_pod_group_without_a_queue_takes_its_pods_queue_label() -> None:
    snapshot = load(m.pod_group("g", None), m.pod("p", queue_name="team-a", group="g"))
    assert group_named(snapshot, "g").queue == "team-a"


def test_a_pod_without_queue_or_pod_group_goes_to_the_default_queue() -> None:
    snapshot = load(m.pod("lonely"))
    (group,) = snapshot.pod_groups
    assert group.queue == "default-queue"
    assert group.name == "pg-lonely" and group.min_member == 1


def test_a_pod_without_a_queue_label_uses_its_project_label() -> None:
    snapshot = load(m.pod("p", labels={"project": "team-a"}))
    assert snapshot.pod_groups[0].queue == "team-a"


def test_the_project_label_is_suffixed_with_the_node_pool() -> None:
    snapshot = load(m.pod("p", labels={"project": "team-a", "kai.scheduler/node-pool": "h100"}))
    assert snapshot.pod_groups[0].queue == "team-a-h100"


def test_the_queue_label_wins_over_the_project_label() -> None:
    snapshot = load(m.pod("p", queue_name="research", labels={"project": "team-a"}))
    assert snapshot.pod_groups[0].queue == "research"


def test_a_pod_labelled_non_preemptible_gets_a_non_preemptible_implicit_group() -> None:
    snapshot = load(m.pod("p", queue_name="q", labels={"kai.scheduler/preemptibility": "non-preemptible"}))
    group = snapshot.pod_groups[0]
    assert group.priority == 50 and not group.preemptible


def test_a_pod_labelled_semi_preemptible_gets_a_semi_preemptible_implicit_group() -> None:
    snapshot = load(m.pod("p", queue_name="q", labels={"kai.scheduler/preemptibility": "semi-preemptible"}))
    group = snapshot.pod_groups[0]
    assert group.semi_preemptible and not group.preemptible


def test_the_top_owners_preemptibility_label_wins_over_the_pods() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "serve",
            "namespace": "team",
            "uid": "d1",
            "labels": {"kai.scheduler/preemptibility": "semi-preemptible"},
        },
        "spec": {"replicas": 1},
    }
    pod = m.pod("p", queue_name="q", labels={"kai.scheduler/preemptibility": "preemptible"})
    pod["metadata"]["ownerReferences"] = [{"kind": "Deployment", "name": "serve", "uid": "d1", "controller": True}]
    snapshot = load(deployment, pod)
    assert snapshot.pod_groups[0].semi_preemptible


def test_an_invalid_preemptibility_label_on_a_pod_is_ignored_with_a_warning() -> None:
    snapshot = load(m.pod("p", queue_name="q", labels={"kai.scheduler/preemptibility": "sometimes"}))
    assert snapshot.pod_groups[0].preemptible
    assert any("kai.scheduler/preemptibility" in w and "sometimes" in w for w in snapshot.report.warnings)


def test_pods_of_one_owner_share_one_implicit_group_named_after_it() -> None:
    def owned(name: str) -> m.Manifest:
        manifest = m.pod(name, queue_name="q")
        manifest["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "train", "uid": "u1", "controller": True}]
        return manifest

    snapshot = load(owned("train-a"), owned("train-b"))
    assert [g.name for g in snapshot.pod_groups] == ["pg-train-u1"]
    assert {p.pod_group for p in snapshot.pods} == {"pg-train-u1"}


def test_pods_of_other_schedulers_get_no_pod_group() -> None:
    snapshot = load(m.pod("web", scheduler="default-scheduler", node_name="n1"))
    assert snapshot.pod_groups == () and snapshot.pods[0].pod_group is None


# ------------------------------------------------------------------ nodes and pods


def test_node_units_and_gpu_memory_label() -> None:
    snapshot = load(m.node("n1", gpu=4, cpu="32", memory="256Gi", labels={"nvidia.com/gpu.memory": "81559"}))
    node = snapshot.nodes[0]
    assert (node.allocatable.gpu, node.allocatable.cpu, node.allocatable.memory) == (4, 32_000, 256 * 2**30)
    assert node.gpu_memory_mib == 81_500  # floored to a multiple of 100, as KAI does


def test_a_node_that_is_not_ready_is_kept_but_marked() -> None:
    assert not load(m.node("n1", ready=False)).nodes[0].ready


def test_pod_requests_add_up_over_containers_and_limits_stand_in_for_missing_requests() -> None:
    manifest = m.pod("p", cpu="500m", memory="1Gi")
    manifest["spec"]["containers"].append(
        {"name": "side", "resources": {"limits": {"cpu": "250m", "memory": "512Mi", "nvidia.com/gpu": "1"}}}
    )
    requests = load(manifest).pods[0].requests
    assert (requests.cpu, requests.memory, requests.gpu) == (750, 1.5 * 2**30, 1)


def test_a_gpu_fraction_annotation_becomes_a_gpu_share() -> None:
    snapshot = load(m.pod("p", annotations={"gpu-fraction": "0.25"}))
    share = snapshot.pods[0].gpu_share
    assert share is not None and share.fraction == 0.25 and share.devices == 1
