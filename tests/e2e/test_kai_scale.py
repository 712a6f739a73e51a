"""KAI's scale scenarios (``python -m loadtests.kai_scale``) at the quick size on real clusters: fill
and reclaim of one GPU for KAI itself, kai-ray and (fill) kube-scheduler; every fill pod bound by
each, and each reclaimer running with one eviction made for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import loadtests.kai_scale as kai_scale
from loadtests.kai_scale_scenarios import QUICK, RECLAIM, SANITY


@pytest.mark.timeout(1200)
def test_quick_fill_binds_every_pod_and_the_reclaimer_ends_running(
    binaries: Path, kai_binaries: Path, tmp_path: Path
) -> None:
    argv = ["--quick", "--scenarios", "fill,reclaim-one", "--samples", "1", "--out", str(tmp_path)]
    code = kai_scale.main(argv)
    rows = json.loads((tmp_path / "results.json").read_text())["results"]
    assert code == 0, [(r["scenario"], r["system"], r["status"], r["errors"]) for r in rows]
    state = json.loads((tmp_path / "state.json").read_text())["state"]
    assert set(state["fill"]) == {"KAI", "kai-ray", "kube-scheduler"}
    for system, found in state["fill"].items():
        assert found["counts"][SANITY] == {"bound": QUICK.gpus, "pending": 0, "evicted": 0}, system
        assert set(found["gpusPerNode"].values()) == {8}, system
    for system, found in state["reclaim-one"].items():
        reclaimers = {name: pod for name, pod in found["pods"].items() if pod["queue"] == RECLAIM}
        assert reclaimers and all(pod["phase"] == "Running" for pod in reclaimers.values()), (system, reclaimers)
        assert len(found["evicted"]) == len(reclaimers), system  # one one-GPU job made room for each
