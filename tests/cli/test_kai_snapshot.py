"""``kai-ray schedule --snapshot snapshot.zip``: KAI's /get-snapshot ZIP, cluster and config together."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

from kai_ray.io.kai_snapshot import UNLIMITED_PREEMPTEES, config_from_kai
from tests import manifests as m
from tests.cli.conftest import RunCli

HERE = Path(__file__).resolve().parent / "kai_snapshot"


def _decisions(out: dict[str, Any]) -> dict[str, str]:
    return {key: f"{pod['status']} {pod.get('node') or '-'}" for key, pod in out["pods"].items()}


def _zip(path: Path, snapshot: dict[str, Any]) -> Path:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("snapshot.json", json.dumps(snapshot))
    path.write_bytes(buffer.getvalue())
    return path


def _bare(manifest: m.Manifest) -> m.Manifest:
    """As KAI's informers hold objects: no kind, no apiVersion."""
    return {k: v for k, v in manifest.items() if k not in ("kind", "apiVersion")}


def test_a_zip_written_by_kai_replays_with_kais_decisions(kai_ray: RunCli) -> None:
    expected = json.loads((HERE / "kai-decisions.json").read_text())
    result = kai_ray("schedule", "--snapshot", HERE / "snapshot.zip", "--now", expected["now"])
    assert result.code == 0, result.err
    assert _decisions(result.json()) == expected["pods"]
    assert {s.split()[0] for s in expected["pods"].values()} >= {"Binding", "Pipelined", "Releasing", "Pending"}


def test_the_zips_config_applies_and_a_config_file_overrides_it(kai_ray: RunCli, tmp_path: Path) -> None:
    raw = {
        "nodes": [_bare(m.node("a", gpu=4)), _bare(m.node("b", gpu=4))],
        "queues": [_bare(m.queue("q", resources=m.UNLIMITED_RESOURCES))],
        "podGroups": [_bare(m.pod_group("g", "q", namespace="team", min_member=1))],
        "pods": [_bare(m.pod("p0", "q", gpu=1, group="g")), _bare(m.pod("p1", "q", gpu=1, group="g"))],
    }
    spread = {"tiers": [{"plugins": [{"name": "nodeplacement", "arguments": {"gpu": "spread", "cpu": "binpack"}}]}]}
    path = _zip(
        tmp_path / "s.zip",
        {
            "config": {"actions": "allocate", **spread},
            "schedulerParams": {"schedulerName": "kai-scheduler"},
            "rawObjects": raw,
        },
    )
    pods = kai_ray("schedule", "--snapshot", path, "--now", "2026-01-01T00:00:00Z").json()["pods"]
    assert {pods["team/p0"]["node"], pods["team/p1"]["node"]} == {"a", "b"}  # spread, from the ZIP
    config = tmp_path / "binpack.yaml"
    config.write_text("actions: [allocate]\n")
    pods = kai_ray("schedule", "--snapshot", path, "--config", config, "--now", "2026-01-01T00:00:00Z").json()["pods"]
    assert pods["team/p0"]["node"] == pods["team/p1"]["node"]  # binpack, from the file


def test_kai_parameters_missing_from_the_json_are_go_zero_values() -> None:
    warnings: list[str] = []
    config = config_from_kai({"actions": "allocate, reclaim"}, {}, warnings)
    assert config["actions"] == ["allocate", "reclaim"]
    assert config["maxConsolidationPreemptees"] == 0  # KAI's snapshot tool runs with 0: no consolidation
    assert config["useSchedulingSignatures"] is False and config["allowConsolidatingReclaim"] is False
    assert config["defaultStalenessGracePeriod"] == 0.0
    unlimited = config_from_kai({}, {"maxNumberConsolidationPreemptees": -1, "fullHierarchyFairness": True}, warnings)
    assert unlimited["maxConsolidationPreemptees"] == UNLIMITED_PREEMPTEES
    plugins = {"tiers": [{"plugins": [{"name": "proportion", "arguments": {"kValue": "0.5"}}, {"name": "gpuspread"}]}]}
    tuned = config_from_kai({**plugins, "queueDepthPerAction": {"allocate": 3}}, {}, warnings)
    assert tuned["kValue"] == 0.5 and tuned["placementStrategy"]["gpuDevice"] == "spread"
    assert any("queueDepthPerAction" in w for w in warnings)  # a setting kai-ray ignores is named


def test_a_bind_request_holds_its_pods_place(kai_ray: RunCli, tmp_path: Path) -> None:
    bind = {
        "metadata": {"name": "p0", "namespace": "team"},
        "spec": {"podName": "p0", "selectedNode": "a"},
    }
    raw = {
        "nodes": [m.node("a", gpu=1), m.node("b", gpu=1)],
        "queues": [m.queue("q", resources=m.UNLIMITED_RESOURCES)],
        "podGroups": [m.pod_group("g0", "q", namespace="team"), m.pod_group("g1", "q", namespace="team")],
        "pods": [m.pod("p0", "q", gpu=1, group="g0"), m.pod("p1", "q", gpu=1, group="g1")],
        "bindRequests": [bind],
    }
    path = _zip(tmp_path / "s.zip", {"config": {"actions": "allocate"}, "schedulerParams": {}, "rawObjects": raw})
    pods = kai_ray("schedule", "--snapshot", path, "--now", "2026-01-01T00:00:00Z").json()["pods"]
    assert (pods["team/p0"]["status"], pods["team/p0"]["node"]) == ("Binding", "a")
    assert (pods["team/p1"]["status"], pods["team/p1"]["node"]) == ("Binding", "b")  # a is taken


def test_a_node_pool_shard_sees_only_its_pool(kai_ray: RunCli, tmp_path: Path) -> None:
    pooled = m.node("pool-x", gpu=8, labels={"kai.scheduler/node-pool": "x"})
    raw = {
        "nodes": [m.node("plain", gpu=8), pooled],
        "queues": [m.queue("q", resources=m.UNLIMITED_RESOURCES)],
        "podGroups": [m.pod_group("g", "q", namespace="team")],
        "pods": [m.pod("p", "q", gpu=1, group="g")],
    }
    params = {"partitionParams": {"NodePoolLabelKey": "kai.scheduler/node-pool", "NodePoolLabelValue": ""}}
    path = _zip(tmp_path / "s.zip", {"config": {"actions": "allocate"}, "schedulerParams": params, "rawObjects": raw})
    result = kai_ray("schedule", "--snapshot", path, "--now", "2026-01-01T00:00:00Z")
    assert result.json()["pods"]["team/p"]["node"] == "plain"
    assert "other pools left out" in result.err


def test_a_zip_that_is_not_kais_snapshot_is_one_line_and_exit_2(kai_ray: RunCli, tmp_path: Path) -> None:
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as archive:
        archive.writestr("notes.txt", "hello")
    broken = _zip(tmp_path / "broken.zip", {})
    broken.write_bytes(broken.read_bytes()[:40])
    for path, words in ((other, "no snapshot.json"), (broken, "cannot read the ZIP")):
        result = kai_ray("schedule", "--snapshot", path)
        assert result.code == 2 and len(result.error_lines) == 1 and words in result.err, result.err
