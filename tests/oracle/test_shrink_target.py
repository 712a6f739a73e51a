"""What the long run's shrinker keeps while it shrinks: the pods the two schedulers disagree on,
by status (no Go needed)."""

from __future__ import annotations

from typing import Any

from tests.oracle.cases import disagreement


def _outcome(**pods: tuple[str, str | None]) -> dict[str, Any]:
    return {"pods": {f"default/{name}": {"status": status, "node": node} for name, (status, node) in pods.items()}}


def test_only_status_differences_count_and_a_pod_one_side_lacks_is_one() -> None:
    kai = _outcome(a=("Releasing", "n0"), b=("Pipelined", "n1"), c=("Running", "n2"))
    ray = _outcome(a=("Pipelined", "n0"), b=("Pipelined", "n3"), d=("Binding", "n1"))
    assert disagreement(kai, ray) == {
        ("default/a", "Releasing", "Pipelined"),
        ("default/c", "Running", "-"),
        ("default/d", "-", "Binding"),
    }  # b differs only in its node


def test_no_kai_outcome_no_disagreement() -> None:
    assert disagreement(None, _outcome(a=("Running", "n0"))) == set()
