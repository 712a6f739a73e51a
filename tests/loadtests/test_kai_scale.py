"""KAI's scale scenarios (loadtests.kai_scale): the scenario data, the report and the command line
on their own. The quick run on real clusters is in tests/e2e/test_kai_scale.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import loadtests.kai_scale as kai_scale
import loadtests.kai_scale_compare as compare
from loadtests.kai_scale_run import Outcome
from loadtests.kai_scale_scenarios import (
    FULL,
    QUICK,
    RECLAIM,
    SANITY,
    SCENARIOS,
    TOPOLOGY_LEVELS,
    distributed_job,
    queues,
    single_gpu_jobs,
    topology_nodes,
)


# ------------------------------------------------------------------ the scenarios as data
def test_the_infeasible_quota_leaves_reclaim_one_gpu_short_of_the_distributed_job() -> None:
    # KAI's: 500 nodes x 8 GPUs, the filling queue's quota 4,000 - 10 x 8 + 1.
    assert FULL.infeasible_quota == 3_921
    assert FULL.gpus - FULL.infeasible_quota == 10 * 8 - 1
    assert QUICK.gpus - QUICK.infeasible_quota == 10 * 8 - 1


def test_the_topology_nodes_are_two_per_rack_labelled_at_every_level() -> None:
    assert FULL.topology_nodes == 512  # KAI's 4 zones x 8 blocks x 8 racks x 2
    found = topology_nodes(QUICK)
    assert len(found) == QUICK.topology_nodes
    racks: dict[tuple[str, ...], int] = {}
    for node in found:
        labels = node["metadata"]["labels"]
        domain = tuple(labels[label] for label, _ in TOPOLOGY_LEVELS)
        racks[domain] = racks.get(domain, 0) + 1
    assert set(racks.values()) == {2}


def test_jobs_ask_for_gpus_only_in_their_queue_and_a_gang_names_its_podgroup() -> None:
    [job] = single_gpu_jobs(SANITY, 1, SANITY, "kai-scheduler")
    assert job["metadata"]["labels"]["kai.scheduler/queue"] == SANITY
    assert job["spec"]["schedulerName"] == "kai-scheduler"
    assert job["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1"}}
    group, *pods = distributed_job("gang", RECLAIM, 3, 8, "kai-scheduler", TOPOLOGY_LEVELS[2][0])
    assert group["spec"]["minMember"] == 3 and group["spec"]["topologyConstraint"]["preferredTopologyLevel"]
    assert {p["metadata"]["annotations"]["pod-group-name"] for p in pods} == {"gang"}


def test_every_queue_has_a_parent_but_the_parent() -> None:
    # KAI v0.12 schedules only queues with a parent (tests/e2e/test_kai_deployed.py).
    parent, *children = queues((0, 0, -1))
    assert "parentQueue" not in parent["spec"]
    assert {c["spec"]["parentQueue"] for c in children} == {parent["metadata"]["name"]}
    assert children[0]["spec"]["resources"]["gpu"] == {"quota": 0, "overQuotaWeight": 0, "limit": -1}


def test_kube_scheduler_runs_the_plain_pod_scenarios_only() -> None:
    names = {s.key: [system.name for system in kai_scale.systems(s, None)] for s in SCENARIOS}
    assert names["fill"] == ["KAI", "kai-ray", "kube-scheduler"]
    assert all(found == ["KAI", "kai-ray"] for key, found in names.items() if key != "fill")
    with pytest.raises(ValueError, match="no scenario nope"):
        kai_scale.chosen("fill,nope")


def test_systems_can_be_chosen_by_name() -> None:
    fill = SCENARIOS[0]
    assert fill.key == "fill"
    only = kai_scale.chosen_systems("kai-ray, Kube-Scheduler")
    assert [system.name for system in kai_scale.systems(fill, None, only)] == ["kai-ray", "kube-scheduler"]
    assert kai_scale.chosen_systems(None) == ("KAI", "kai-ray", "kube-scheduler")
    with pytest.raises(ValueError, match="no system volcano"):
        kai_scale.chosen_systems("kai,volcano")


def test_a_scenario_that_timed_out_is_a_row_and_fails_the_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    async def run_all(scenarios: Any, size: Any, shards: Any, out: Path, names: Any) -> tuple[list[Outcome], Any]:
        done = Outcome("fill", "KAI", size.nodes, seconds=12.5, pods=160, done=160, window=13.0)
        late = Outcome("fill", "kai-ray", size.nodes, status="timed out", pods=160, done=90, window=240.0)
        states: dict[str, Any] = {"fill": {"KAI": {"counts": {}}, "kai-ray": {"counts": {}}}}
        kai_scale.write(out, size, [done, late], states)
        return [done, late], states

    monkeypatch.setattr(kai_scale, "ensure_built", lambda **_: Path())
    monkeypatch.setattr(kai_scale, "run_all", run_all)
    assert kai_scale.main(["--quick", "--scenarios", "fill", "--out", str(tmp_path)]) == 1
    rows = json.loads((tmp_path / "results.json").read_text())["results"]
    assert [(r["status"], r["done"]) for r in rows] == [("ok", 160), ("timed out", 90)]
    assert set(json.loads((tmp_path / "state.json").read_text())["state"]["fill"]) == {"KAI", "kai-ray"}
    assert (tmp_path / "seconds.png").stat().st_size > 0
    text = kai_scale.report([Outcome("fill", "KAI", 500, seconds=400.0, pods=4000, done=4000, window=401.0)], FULL)
    assert "398.0" in text  # KAI's published figure next to a 500-node row


# ------------------------------------------------------------------ KAI's and kai-ray's final states
def _state(bound: int, evicted: int, spread: list[int]) -> dict[str, Any]:
    return {
        "counts": {SANITY: {"bound": bound, "pending": 0, "evicted": evicted}},
        "queueGpus": {SANITY: float(sum(spread))},
        "gpusPerNode": {f"kwok-{i:05d}": g for i, g in enumerate(spread)},
    }


def test_final_states_compare_counts_and_how_the_gpus_lie_not_which_node_is_which() -> None:
    same = {"fill": {"KAI": _state(16, 0, [8, 8, 0]), "kai-ray": _state(16, 0, [0, 8, 8])}}
    assert compare.differences(same) == []
    spread = {"fill": {"KAI": _state(16, 0, [8, 8, 0]), "kai-ray": _state(16, 0, [8, 4, 4])}}
    (found,) = compare.differences(spread)
    assert (found.aspect, found.reference, found.candidate) == ("nodes by GPUs in use", {0: 1, 8: 2}, {4: 2, 8: 1})
    assert found.classified[0] == "unclassified" and "[unclassified]" in compare.summary(spread)


def test_a_difference_in_evictions_is_named_with_its_queue_and_a_known_one_with_its_class(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    states = {"reclaim-one": {"KAI": _state(10, 1, [8, 2]), "kai-ray": _state(10, 2, [8, 2]), "kube-scheduler": {}}}
    (found,) = compare.differences(states)
    assert found.aspect == f"queue {SANITY}: evicted" and (found.reference, found.candidate) == (1, 2)
    monkeypatch.setitem(compare.KNOWN, ("reclaim-one", found.aspect), ("deliberate", "see README"))
    assert compare.summary(states).endswith("[deliberate] see README")
