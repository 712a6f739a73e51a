"""kai-ray's own cases for reservations and backfill (``reservation.json``), in the format of KAI's
scenarios and run the same way: the snapshot and config files ``kai-ray schedule`` would read, the
same session, the same judge, and the pending reasons a user reads. KAI has no reservations, so
the expected outcomes are kai-ray's design (docs/reservation-backfill.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.kai_scenarios import Doc
from tests.conformance.test_kai_scenarios import decide_action_scenario, schedule_differences

CASES: list[Doc] = json.loads(Path(__file__).with_name("reservation.json").read_text("utf-8"))["scenarios"]


def _param(case: Doc) -> Any:
    return pytest.param(case, id=case["id"])


def run_case(case: Doc, tmp_path: Path) -> tuple[dict[str, Any], list[str]]:
    """The case as the files ``kai-ray schedule`` reads, one session, and what differs (statuses,
    nodes and the words of the pending reasons)."""
    _, pods, pod_keys = decide_action_scenario(case, tmp_path)
    differences = schedule_differences(case, pods, pod_keys)
    for task, text in case["expected"].get("reasons", {}).items():
        reason = pods[pod_keys[task]].get("reason", "")
        if text not in reason:
            differences.append(f"{task}: reason {reason!r} does not say {text!r}")
    return pods, differences


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_reservation_case(case: Doc, tmp_path: Path) -> None:
    _, differences = run_case(case, tmp_path)
    assert not differences, "\n".join([case["description"], *differences, f"inputs: {tmp_path}"])


def test_every_case_has_a_unique_id_and_asks_only_what_the_runner_checks() -> None:
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids))
    for case in CASES:
        assert {"jobs", "tasks", "reasons"} >= set(case["expected"]), case["id"]
