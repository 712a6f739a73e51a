"""Pods that name a group of the Kubernetes Workload API (scheduling.k8s.io): kai-ray does not
read those groups yet, so it says so, schedules the pod as KAI v0.12 does (grouped by KAI's pod
grouper, no gang policy from the Workload) and loses nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from kai_ray.io.snapshot_loader import load_snapshot
from tests import manifests as m


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("schedulingGroup", {"podGroupName": "trainer-group"}),  # 1.36 on
        ("workloadRef", {"name": "trainer", "podGroup": "workers"}),  # 1.35
    ],
)
def test_a_pod_naming_a_workload_group_is_read_with_a_warning(tmp_path: Path, field: str, value: object) -> None:
    pod = m.pod("trainer-0", "team-a", gpu=1)
    pod["spec"][field] = value
    workload = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "trainer-group", "namespace": "team"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}},
    }
    snapshot = load_snapshot(str(m.write(tmp_path / "s.yaml", [m.node("n1"), m.queue("team-a"), pod, workload])))
    assert [p.name for p in snapshot.pods] == ["trainer-0"]
    assert snapshot.pods[0].requests.gpu == 1
    warnings = [w for w in snapshot.report.warnings if "Workload API" in w]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"Pod team/trainer-0: spec.{field} names a group of the Kubernetes Workload API")
    assert "without that group's gang policy" in warnings[0]


def test_pods_without_a_workload_group_say_nothing_of_it(tmp_path: Path) -> None:
    snapshot = load_snapshot(str(m.write(tmp_path / "s.yaml", [m.node("n1"), m.queue("team-a"), m.pod("p", "team-a")])))
    assert not [w for w in snapshot.report.warnings if "Workload API" in w]
