"""The situations of KAI v0.12's MIG tests (``mig.json``), in the format of KAI's scenarios and run
the same way: the snapshot and config files ``kai-ray schedule`` would read, the same session, the
same judge. Nodes offer MIG instances by profile and pods ask for them by name; KAI's resource-type
predicate (which nodes take which kind of GPU request) and its GPU sums (an instance of ``<n>g``
counts ``n`` GPUs) decide the outcomes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.kai_scenarios import Doc, own_cases
from tests.conformance.test_kai_scenarios import check_own_cases, run_action_scenario, scenario_param

CASES = own_cases("mig.json")


@pytest.mark.parametrize("case", [scenario_param(c) for c in CASES])
def test_mig_case(case: Doc, tmp_path: Path) -> None:
    _, differences = run_action_scenario(case, tmp_path)
    assert not differences, "\n".join([case["description"], *differences, f"inputs: {tmp_path}"])


def test_every_case_has_a_unique_id_is_about_mig_and_asks_only_what_the_judge_checks() -> None:
    check_own_cases(CASES)
    for case in CASES:
        assert any("mig" in n or "mig_strategy" in n for n in case["nodes"]), case["id"]
