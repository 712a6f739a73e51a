"""Snapshot files in every form docs/architecture.md#snapshot-input accepts, and cluster states KAI tolerates."""

from __future__ import annotations

from pathlib import Path

import pytest

from kai_ray.errors import InputError
from kai_ray.io.snapshot_loader import load_snapshot, snapshot_from_documents
from tests import manifests as m

CLUSTER = [
    m.node("n1"),
    m.queue("parent"),
    m.queue("child", parent="parent"),
    m.pod_group("g", "child", min_member=2),
    m.pod("g-0", "child", group="g"),
    m.pod("g-1", "child", group="g"),
]


@pytest.mark.parametrize("form", ["stream", "list", "json"])
def test_a_multi_document_stream_a_list_and_json_load_the_same_cluster(tmp_path: Path, form: str) -> None:
    snapshot = load_snapshot(m.write(tmp_path / "snap", CLUSTER, form))
    assert [n.name for n in snapshot.nodes] == ["n1"]
    assert sorted(q.name for q in snapshot.queues) == ["child", "parent"]
    assert [(g.key, g.min_member, g.queue) for g in snapshot.pod_groups] == [("team/g", 2, "child")]
    assert sorted(p.key for p in snapshot.pods) == ["team/g-0", "team/g-1"]
    assert snapshot.report.skipped_kinds == {} and snapshot.report.warnings == ()


def test_typed_lists_from_the_api_are_flattened_too() -> None:
    pod_list = {"apiVersion": "v1", "kind": "PodList", "items": [m.pod("a"), m.pod("b")]}
    assert len(snapshot_from_documents([pod_list, {"kind": "NodeList", "apiVersion": "v1", "items": []}]).pods) == 2


def test_a_kubectl_get_all_dump_skips_and_counts_the_kinds_kai_ray_does_not_use(tmp_path: Path) -> None:
    web = m.pod("web-7d4b9-abcde", scheduler="default-scheduler", node_name="n1", phase="Running")
    web["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "web-7d4b9", "uid": "r1", "controller": True}]
    dump = [
        m.node("n1"),
        web,
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "team"}, "spec": {}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kubernetes", "namespace": "default"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "team"}},
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-7d4b9", "namespace": "team"}},
        # Same kind name, another API group: not KAI's Queue.
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}},
    ]
    snapshot = load_snapshot(m.write(tmp_path / "all.yaml", dump, "list"))
    assert snapshot.report.skipped_kinds == {
        "Deployment": 1,
        "Queue (scheduling.volcano.sh)": 1,  # named with its group: not read as one of KAI's
        "ReplicaSet": 1,
        "Service": 2,
    }
    assert [p.key for p in snapshot.pods] == ["team/web-7d4b9-abcde"]
    assert snapshot.queues == () and snapshot.pod_groups == ()


def test_an_orphan_queue_and_its_subtree_are_dropped_with_a_warning() -> None:
    snapshot = snapshot_from_documents(
        [
            m.queue("root"),
            m.queue("kept", parent="root"),
            m.queue("orphan", parent="gone"),
            m.queue("orphan-child", parent="orphan"),
        ]
    )
    assert sorted(q.name for q in snapshot.queues) == ["kept", "root"]
    warnings = " | ".join(snapshot.report.warnings)
    assert "Queue orphan: dropped" in warnings and "Queue orphan-child: dropped" in warnings
    assert "'gone' does not exist" in warnings


def test_pods_naming_a_missing_queue_or_pod_group_are_kept_for_the_session_to_explain() -> None:
    snapshot = snapshot_from_documents(
        [
            m.pod("no-queue", queue_name="nowhere"),
            m.pod("no-group", queue_name="q", group="ghost"),
        ]
    )
    assert sorted(p.name for p in snapshot.pods) == ["no-group", "no-queue"]
    assert next(p for p in snapshot.pods if p.name == "no-group").pod_group == "ghost"
    assert [g.queue for g in snapshot.pod_groups] == ["nowhere"]


def test_a_bare_pod_naming_its_own_missing_group_is_grouped_as_the_pod_grouper_would() -> None:
    """``pg-<pod>-<uid>`` is the group the pod grouper makes for a bare pod (a bind writes the
    annotation before the object exists; a user may delete the object later). Without the object,
    the running pod still counts in its queue, as the live loop counts it; another missing group
    name is left for the session to explain."""
    own = m.pod("solo", queue_name="q", group="pg-solo-u1", gpu=2, node_name="n1", phase="Running")
    own["metadata"]["uid"] = "u1"
    snapshot = snapshot_from_documents([m.queue("q"), own, m.pod("other", queue_name="q", group="ghost")])
    groups = {g.name: g.queue for g in snapshot.pod_groups}
    assert groups == {"pg-solo-u1": "q"}
    assert next(p for p in snapshot.pods if p.name == "solo").pod_group == "pg-solo-u1"


def test_an_empty_list_is_an_empty_cluster(tmp_path: Path) -> None:
    snapshot = load_snapshot(m.write(tmp_path / "empty-list.yaml", [], "list"))
    assert snapshot.nodes == () and snapshot.pods == ()


def test_an_empty_file_is_refused_because_it_is_almost_always_a_mistake(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing here\n")
    with pytest.raises(InputError, match="empty.yaml: no Kubernetes objects"):
        load_snapshot(path)
