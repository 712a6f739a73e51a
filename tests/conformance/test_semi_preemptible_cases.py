"""kai-ray's own cases for KAI's semi-preemptible design (``semi_preemptible.json``), in the format of
KAI's scenarios and run the same way: the snapshot and config files ``kai-ray schedule`` would
read, the same session, the same judge. KAI v0.12 has no such mode, so the expected outcomes are
the design's (docs/semi-preemptible.md), not KAI's code's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.kai_scenarios import Doc
from tests.conformance.test_kai_scenarios import run_action_scenario

CASES: list[Doc] = json.loads(Path(__file__).with_name("semi_preemptible.json").read_text("utf-8"))["scenarios"]


def _param(case: Doc) -> Any:
    return pytest.param(case, id=case["id"])


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_semi_preemptible_case(case: Doc, tmp_path: Path) -> None:
    snapshot, differences = run_action_scenario(case, tmp_path)
    assert any(g.semi_preemptible for g in snapshot.pod_groups), "the case is about a semi-preemptible job"
    assert not differences, "\n".join([case["description"], *differences, f"inputs: {tmp_path}"])


def test_every_case_has_a_unique_id_and_asks_only_what_the_judge_checks() -> None:
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids))
    for case in CASES:
        assert {"jobs", "tasks"} >= set(case["expected"]), case["id"]
