"""KAI's topology documentation examples (docs/topology/README.md, multilevel.md, segments.md in
KAI Scheduler), each a snapshot under examples/topology/ run through ``kai-ray schedule`` as a
user would, with the placement KAI's docs describe."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from kai_ray.app.cli.main import main
from tests.conftest import REPO

EXAMPLES = REPO / "examples" / "topology"


def schedule(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    code = main(["schedule", "--snapshot", str(path), "--now", "2026-01-01T00:00:00Z", "-o", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    decisions: dict[str, Any] = json.loads(out.out)
    return decisions


def node_labels(path: Path) -> dict[str, dict[str, str]]:
    items = yaml.safe_load(path.read_text())["items"]
    return {i["metadata"]["name"]: i["metadata"].get("labels", {}) for i in items if i["kind"] == "Node"}


def placed(decisions: dict[str, Any], prefix: str) -> dict[str, str]:
    """Pod name -> node, for the pods whose name starts with ``prefix``; all must be placed."""
    out = {}
    for key, pod in decisions["pods"].items():
        name = key.split("/", 1)[1]
        if name.startswith(prefix):
            assert pod["status"] == "Binding", (key, pod)
            out[name] = pod["node"]
    return out


def test_zone_rack_example_packs_zone_a_and_fills_its_roomiest_rack_first(capsys: pytest.CaptureFixture[str]) -> None:
    """README.md's example: 3 one-GPU pods, zone required, rack preferred. Zone A (5 GPUs) is
    chosen over zone B (6) by bin-packing; rack A1 takes 2 pods, one more rack the third: 2 racks."""
    path = EXAMPLES / "zone-rack.yaml"
    labels = node_labels(path)
    nodes = placed(schedule(path, capsys), "distributed-training-")
    assert len(nodes) == 3
    assert {labels[n]["topology.kubernetes.io/zone"] for n in nodes.values()} == {"zone-a"}
    racks = [labels[n]["topology.kubernetes.io/rack"] for n in nodes.values()]
    assert racks.count("rack-a1") == 2 and len(set(racks)) == 2
    # KAI's plugin breaks the tie between racks A2-A4 (equally full) by ID, ranking A4 highest.
    assert sorted(nodes.values()) == ["node-a1-1", "node-a1-2", "node-a4-1"]


def test_required_rack_never_crosses_racks_nor_uses_unlabelled_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    decisions = schedule(EXAMPLES / "required-rack.yaml", capsys)
    assert set(placed(decisions, "train-4-").values()) <= {"r3-n1", "r3-n2"}  # rack r3, the only one with 4 GPUs
    waiting = decisions["pods"]["default/train-9-0"]
    assert waiting["status"] == "Pending"
    # the reason names the constraint, what no rack has, and the rack that came closest
    assert "requirement cloud.provider.com/topology-rack couldn't be satisfied" in waiting["reason"]
    assert "no topology-rack has 9 GPUs free for the 9 pods; best topology-rack b2.r3 has 4" in waiting["reason"]
    assert all(p["node"] not in ("spare-1", "spare-2") for p in decisions["pods"].values())


def test_preferred_rack_falls_back_to_the_block_and_crowds_the_roomiest_rack(
    capsys: pytest.CaptureFixture[str],
) -> None:
    nodes = placed(schedule(EXAMPLES / "preferred-rack.yaml", capsys), "train-4-")
    assert sorted(nodes.values()) == ["r1-n1", "r2-n1", "r2-n1", "r2-n1"]


def test_required_block_preferred_rack_lands_in_one_rack_of_the_busier_block(
    capsys: pytest.CaptureFixture[str],
) -> None:
    nodes = placed(schedule(EXAMPLES / "block-rack.yaml", capsys), "train-3-")
    assert set(nodes.values()) == {"r2-n1"}


def test_multilevel_sample1_each_sub_group_on_its_own_rack(capsys: pytest.CaptureFixture[str]) -> None:
    path = EXAMPLES / "multilevel-independent.yaml"
    labels = node_labels(path)
    decisions = schedule(path, capsys)
    racks: dict[str, set[str]] = defaultdict(set)
    for pod, node in placed(decisions, "pod-").items():
        racks[pod[4]].add(labels[node]["topology/rack"])
    assert racks == {"a": {"rack-1"}, "b": {"rack-2"}}
    assert decisions["podGroups"]["default/sample1"]["status"] == "Binding"


def test_multilevel_sample2_zone_spine_and_racks_all_hold(capsys: pytest.CaptureFixture[str]) -> None:
    path = EXAMPLES / "multilevel-hierarchy.yaml"
    labels = node_labels(path)
    nodes = placed(schedule(path, capsys), "pod-")
    assert len(nodes) == 6
    where = {pod: labels[node] for pod, node in nodes.items()}
    assert {w["topology/zone"] for w in where.values()} == {"zone-1"}  # the whole workload in one zone
    assert len({where[p]["topology/spine"] for p in ("pod-a1", "pod-b1", "pod-b2")}) == 1  # a and b share a spine
    for leaf in ("pod-a", "pod-b", "pod-c"):  # each leaf in one rack
        assert len({w["topology/rack"] for p, w in where.items() if p.startswith(leaf)}) == 1
    assert {p: w["topology/rack"] for p, w in where.items()} == {
        "pod-a1": "rack-1",
        "pod-b1": "rack-2",
        "pod-b2": "rack-2",
        "pod-c1": "rack-3",
        "pod-c2": "rack-3",
        "pod-c3": "rack-3",
    }


@pytest.mark.parametrize(
    ("example", "job", "zone"),
    [("segments-rack.yaml", "pytorch-tp4", None), ("segments-zone-rack.yaml", "pytorch-tp4-zoned", "zone-2")],
)
def test_segments_of_four_workers_each_share_a_rack(
    example: str, job: str, zone: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    path = EXAMPLES / example
    labels = node_labels(path)
    nodes = placed(schedule(path, capsys), f"{job}-")
    assert len(nodes) == 17
    rack_label = "cloud.provider.com/topology-rack"
    segments: dict[int, set[str]] = defaultdict(set)
    for pod, node in nodes.items():
        if "-worker-" in pod:
            segments[int(pod.rsplit("-", 1)[1]) // 4].add(labels[node][rack_label])
    assert sorted(segments) == [0, 1, 2, 3]
    assert all(len(racks) == 1 for racks in segments.values())  # workers 0-3 on one rack, 4-7 on one, ...
    assert len({next(iter(r)) for r in segments.values()}) == 4  # here each segment needs a whole rack
    if zone is not None:
        assert {labels[n]["topology.kubernetes.io/zone"] for n in nodes.values()} == {zone}
