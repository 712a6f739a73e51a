"""Gangs of the Kubernetes Workload API (scheduling.k8s.io Workload and PodGroup) in a snapshot:
the pods that name a PodGroup of that API join it as a gang with its minCount, in the queue its
labels (or its Workload's, or its pods') name; what is not read is said in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kai_ray.errors import InputError
from kai_ray.io.snapshot_loader import load_snapshot
from kai_ray.model import ClusterSnapshot, PodGroup
from tests import manifests as m


def gang(
    name: str,
    min_count: int | None,
    version: str = "v1beta1",
    workload: str | None = None,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    policy = {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}
    body: dict[str, Any] = {"schedulingPolicy": policy, **spec}
    if workload is not None and version == "v1alpha2":
        body["podGroupTemplateRef"] = {"workload": {"workloadName": workload, "podGroupTemplateName": "workers"}}
    elif workload is not None:
        body["workloadRef"] = {"workloadName": workload, "templateName": "workers"}
    return {
        "apiVersion": f"scheduling.k8s.io/{version}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "team", "labels": labels or {}},
        "spec": body,
    }


def workload(name: str, labels: dict[str, str] | None = None, priority_class: str | None = None) -> dict[str, Any]:
    template: dict[str, Any] = {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}}
    if priority_class:
        template["priorityClassName"] = priority_class
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "team", "labels": labels or {}},
        "spec": {"podGroupTemplates": [template]},
    }


def member(name: str, group: str, queue_name: str | None = None, **extra: Any) -> dict[str, Any]:
    pod = m.pod(name, queue_name, gpu=1, **extra)
    pod["spec"]["schedulingGroup"] = {"podGroupName": group}
    return pod


def load(tmp_path: Path, objects: list[dict[str, Any]]) -> ClusterSnapshot:
    return load_snapshot(str(m.write(tmp_path / "s.yaml", [m.node("n1"), m.queue("team-a"), *objects])))


def group_of(snapshot: ClusterSnapshot, key: str) -> PodGroup:
    return next(g for g in snapshot.pod_groups if g.key == key)


@pytest.mark.parametrize("version", ["v1beta1", "v1alpha3", "v1alpha2"])
def test_pods_naming_a_workload_api_podgroup_join_it_with_its_min_count(tmp_path: Path, version: str) -> None:
    snapshot = load(
        tmp_path,
        [
            gang("trainer-0", 3, version, workload="trainer"),
            *(member(f"w-{i}", "trainer-0", "team-a") for i in range(4)),
        ],
    )
    group = group_of(snapshot, "team/trainer-0")
    assert (group.min_member, group.queue) == (3, "team-a")
    assert group.workload_api.startswith("Workload API gang team/trainer-0")
    assert "Workload trainer template workers" in group.workload_api
    assert {p.pod_group for p in snapshot.pods} == {"trainer-0"}
    assert all(p.workload_gang for p in snapshot.pods)
    # No implicit KAI PodGroup was made for them.
    assert [g.key for g in snapshot.pod_groups] == ["team/trainer-0"]
    assert snapshot.report.warnings == ()


def test_the_queue_comes_from_the_group_then_its_workload_then_its_pods(tmp_path: Path) -> None:
    snapshot = load(
        tmp_path,
        [
            m.queue("team-b"),
            m.queue("team-c"),
            workload("trainer", labels={"kai.scheduler/queue": "team-b"}),
            gang("own", 1, labels={"kai.scheduler/queue": "team-c"}, workload="trainer"),
            gang("from-workload", 1, workload="trainer"),
            gang("from-pods", 1),
            member("a", "own", "team-a"),
            member("b", "from-workload", "team-a"),
            member("c", "from-pods", "team-a"),
        ],
    )
    queues = {g.name: g.queue for g in snapshot.pod_groups}
    assert queues == {"own": "team-c", "from-workload": "team-b", "from-pods": "team-a"}


def test_the_priority_class_comes_from_the_group_then_its_workload_template(tmp_path: Path) -> None:
    snapshot = load(
        tmp_path,
        [
            m.priority_class("train", 50),
            m.priority_class("build", 100),
            workload("trainer", priority_class="train"),
            gang("from-template", 1, workload="trainer"),
            gang("own", 1, workload="trainer", priorityClassName="build"),
            member("a", "from-template", "team-a"),
            member("b", "own", "team-a"),
        ],
    )
    assert (group_of(snapshot, "team/from-template").priority, group_of(snapshot, "team/own").priority) == (50, 100)
    assert group_of(snapshot, "team/from-template").preemptible  # below 100: KAI's rule for priorities


def test_a_basic_policy_is_a_group_of_min_member_one(tmp_path: Path) -> None:
    snapshot = load(tmp_path, [gang("loose", None), member("a", "loose", "team-a"), member("b", "loose", "team-a")])
    assert group_of(snapshot, "team/loose").min_member == 1
    assert "basic policy" in group_of(snapshot, "team/loose").workload_api


def test_a_pod_naming_a_missing_workload_api_podgroup_keeps_that_name(tmp_path: Path) -> None:
    snapshot = load(tmp_path, [member("lost", "nowhere", "team-a")])
    assert snapshot.pods[0].pod_group == "nowhere" and snapshot.pods[0].workload_gang
    assert snapshot.pod_groups == ()  # never grouped alone (KAI's design): the session says why it waits


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ({}, "spec.schedulingGroup: names no podGroupName"),
        ({"podGroupName": ""}, "spec.schedulingGroup: names no podGroupName"),
        ("trainer", "spec.schedulingGroup: names no podGroupName"),
    ],
)
def test_a_malformed_reference_is_one_warning_and_the_pod_is_grouped_as_before(
    tmp_path: Path, value: object, said: str
) -> None:
    pod = m.pod("p", "team-a", gpu=1)
    pod["spec"]["schedulingGroup"] = value
    snapshot = load(tmp_path, [pod])
    assert [w for w in snapshot.report.warnings if said in w] == [w for w in snapshot.report.warnings]
    assert len(snapshot.report.warnings) == 1
    assert snapshot.report.warnings[0].startswith("Pod team/p: ")
    assert not snapshot.pods[0].workload_gang
    assert snapshot.pods[0].pod_group and snapshot.pods[0].pod_group.startswith("pg-")  # KAI's grouper's group


def test_the_1_35_workload_ref_is_not_read_and_says_so(tmp_path: Path) -> None:
    pod = m.pod("trainer-0", "team-a", gpu=1)
    pod["spec"]["workloadRef"] = {"name": "trainer", "podGroup": "workers"}
    old = {
        "apiVersion": "scheduling.k8s.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "trainer", "namespace": "team"},
        "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 4}}}]},
    }
    snapshot = load(tmp_path, [pod, old])
    [warning] = snapshot.report.warnings
    assert warning.startswith("Pod team/trainer-0: spec.workloadRef (the Workload API of Kubernetes 1.35")
    assert "without that group's gang policy" in warning
    assert snapshot.report.skipped_kinds == {"Workload (scheduling.k8s.io/v1alpha1)": 1}


def test_the_opt_out_annotation_ignores_the_reference(tmp_path: Path) -> None:
    pod = member("p", "trainer-0", "team-a", annotations={"kai.scheduler/ignore-workload-api": "true"})
    snapshot = load(tmp_path, [gang("trainer-0", 2), pod])
    assert not snapshot.pods[0].workload_gang and snapshot.pods[0].pod_group != "trainer-0"
    assert any("kai.scheduler/ignore-workload-api: true" in w for w in snapshot.report.warnings)


def test_the_reference_wins_over_a_pod_group_annotation_and_says_so(tmp_path: Path) -> None:
    pod = member("p", "trainer-0", "team-a", annotations={"pod-group-name": "other"})
    snapshot = load(tmp_path, [gang("trainer-0", 1), pod])
    assert snapshot.pods[0].pod_group == "trainer-0"
    assert snapshot.report.warnings == (
        "Pod team/p: metadata.annotations.pod-group-name 'other' ignored: the pod joins the Workload API gang "
        "its spec.schedulingGroup names ('trainer-0')",
    )


def test_fields_not_honoured_are_named_each_in_one_line(tmp_path: Path) -> None:
    asks = gang(
        "trainer-0",
        2,
        schedulingConstraints={"topology": [{"key": "topology.kubernetes.io/zone"}]},
        disruptionMode={"all": {}},
        preemptionPolicy="Never",
        resourceClaims=[{"name": "shared", "resourceClaimName": "c"}],
        parentCompositePodGroupName="top",
    )
    snapshot = load(tmp_path, [asks, member("p", "trainer-0", "team-a")])
    said = [w.split(": ", 2)[1].split(" ")[0] for w in snapshot.report.warnings]
    assert said == [
        "spec.schedulingConstraints.topology",
        "spec.resourceClaims",
        "spec.disruptionMode",
        "spec.preemptionPolicy",
        "spec.parentCompositePodGroupName",
    ]
    assert all(w.startswith("PodGroup team/trainer-0: ") for w in snapshot.report.warnings)
    assert group_of(snapshot, "team/trainer-0").min_member == 2  # still scheduled as a gang


def test_a_kai_podgroup_of_the_same_name_wins_and_that_is_said(tmp_path: Path) -> None:
    snapshot = load(
        tmp_path, [m.pod_group("trainer-0", "team-a", min_member=1), gang("trainer-0", 3), member("p", "trainer-0")]
    )
    assert group_of(snapshot, "team/trainer-0").min_member == 1
    assert not group_of(snapshot, "team/trainer-0").workload_api
    [warning] = snapshot.report.warnings
    assert warning.startswith("PodGroup team/trainer-0 (scheduling.k8s.io/v1beta1): has the name of KAI's PodGroup")


@pytest.mark.parametrize(
    ("policy", "said"),
    [
        ({}, "must set exactly one of gang and basic"),
        ({"gang": {"minCount": 0}}, "must be a whole number of at least 1"),
        ({"gang": {}}, "gang.minCount: missing"),
    ],
)
def test_a_malformed_gang_policy_is_refused_naming_the_field(tmp_path: Path, policy: object, said: str) -> None:
    broken = gang("trainer-0", 1)
    broken["spec"]["schedulingPolicy"] = policy
    with pytest.raises(InputError, match=f"PodGroup team/trainer-0: spec.schedulingPolicy.*{said}"):
        load(tmp_path, [broken])


def test_pods_without_a_workload_group_say_nothing_of_it(tmp_path: Path) -> None:
    snapshot = load(tmp_path, [m.pod("p", "team-a")])
    assert not [w for w in snapshot.report.warnings if "Workload API" in w or "schedulingGroup" in w]
    assert not snapshot.pods[0].workload_gang
