"""kai-ray's own cases for KAI's semi-preemptible design (``semi_preemptible.json``), in the format of
KAI's scenarios and run the same way: the snapshot and config files ``kai-ray schedule`` would
read, the same session, the same judge. KAI v0.12 has no such mode, so the expected outcomes are
the design's (docs/semi-preemptible.md), not KAI's code's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.kai_scenarios import Doc, own_cases
from tests.conformance.test_kai_scenarios import check_own_cases, run_action_scenario, scenario_param

CASES = own_cases("semi_preemptible.json")


@pytest.mark.parametrize("case", [scenario_param(c) for c in CASES])
def test_semi_preemptible_case(case: Doc, tmp_path: Path) -> None:
    snapshot, differences = run_action_scenario(case, tmp_path)
    assert any(g.semi_preemptible for g in snapshot.pod_groups), "the case is about a semi-preemptible job"
    assert not differences, "\n".join([case["description"], *differences, f"inputs: {tmp_path}"])


def test_every_case_has_a_unique_id_and_asks_only_what_the_judge_checks() -> None:
    check_own_cases(CASES)
