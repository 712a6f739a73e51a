"""MIG as the readers see it: a node's instances by profile, a pod's requested instances, and the
legacy annotation KAI once read MIG requests from."""

from __future__ import annotations

from kai_ray.io.fields import ObjectReader
from kai_ray.io.parse_core import parse_node, parse_pod
from kai_ray.model import MigMode
from tests.manifests import node, pod


def test_a_node_offers_its_mig_instances_by_profile() -> None:
    manifest = node("a100", gpu=0)
    manifest["status"]["allocatable"].update({"nvidia.com/mig-1g.5gb": "7", "nvidia.com/mig-2g.10gb": "0"})
    parsed = parse_node(ObjectReader(manifest, 0))
    assert parsed.allocatable.gpu == 0
    assert dict(parsed.allocatable.scalars) == {"nvidia.com/mig-1g.5gb": 7.0}


def test_a_pod_asks_for_instances_in_requests_or_limits() -> None:
    manifest = pod("sliced", "q")
    manifest["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/mig-3g.20gb": "2"}
    parsed = parse_pod(ObjectReader(manifest, 0))
    assert parsed.requests.gpu == 0
    assert dict(parsed.requests.scalars) == {"nvidia.com/mig-3g.20gb": 2.0}


def test_a_legacy_mig_annotation_is_read_with_a_warning_and_other_annotations_are_not() -> None:
    warnings: list[str] = []
    parse_pod(ObjectReader(pod("old", "q", annotations={"nvidia.com/mig-1g.5gb": "1"}), 0), warnings)
    assert len(warnings) == 1 and "legacy MIG pod" in warnings[0] and "nvidia.com/mig-1g.5gb" in warnings[0]
    quiet: list[str] = []
    parse_pod(ObjectReader(pod("note", "q", annotations={"nvidia.com/mig-1g.5gb": "one"}), 0), quiet)
    assert quiet == []


def test_a_legacy_mig_pod_asks_for_the_annotations_profile_instead_of_its_gpus() -> None:
    manifest = pod("old", "q", gpu=2, annotations={"nvidia.com/mig-2g.10gb": "3", "gpu-fraction": "0.5"})
    parsed = parse_pod(ObjectReader(manifest, 0), [])
    assert parsed.legacy_mig == "nvidia.com/mig-2g.10gb" and parsed.gpu_share is None
    assert parsed.requests.gpu == 0 and dict(parsed.requests.scalars) == {"nvidia.com/mig-2g.10gb": 3.0}
    assert parse_pod(ObjectReader(pod("new", "q", gpu=2), 0)).legacy_mig is None


def test_a_nodes_mig_mode_is_read_with_the_configured_label_and_profiles_listed_at_zero() -> None:
    listed = node("listed", gpu=8, labels={"nvidia.com/mig.strategy": "mixed"})
    listed["status"]["allocatable"]["nvidia.com/mig-1g.5gb"] = "0"
    assert parse_node(ObjectReader(listed, 0)).mig_mode == MigMode.MIXED
    assert parse_node(ObjectReader(node("plain", gpu=8), 0)).mig_mode == MigMode.NONE
    labelled = node("labelled", gpu=8, labels={"example.com/mig": "true", "node-role.kubernetes.io/mig-enabled": "1"})
    assert parse_node(ObjectReader(labelled, 0)).mig_mode == MigMode.ENABLED
    assert parse_node(ObjectReader(labelled, 0), "example.com/other").mig_mode == MigMode.NONE
    labelled["metadata"]["labels"]["example.com/mig"] = "false"
    assert parse_node(ObjectReader(labelled, 0), "example.com/mig").mig_mode == MigMode.NONE
