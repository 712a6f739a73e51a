"""What the oracle's generator never writes, because KAI v0.12 (the oracle) cannot decide it."""

from __future__ import annotations

from typing import Any

from tests.oracle.cases import case_files, load_case
from tests.oracle.clusters import FOCI, generate

SEMI = "semi-preemptible"  # KAI's designed third mode: not in v0.12, so never asked of the oracle


def _marked_semi(documents: list[dict[str, Any]]) -> list[str]:
    marked = []
    for doc in documents:
        labels = (doc.get("metadata") or {}).get("labels") or {}
        spec = doc.get("spec") or {}
        if SEMI in (spec.get("preemptibility"), labels.get("kai.scheduler/preemptibility")):
            marked.append(f"{doc['kind']} {doc['metadata']['name']}")
    return marked


def test_generated_clusters_have_no_semi_preemptible_workload() -> None:
    for seed in range(40 * len(FOCI)):
        case = generate(seed)
        assert not _marked_semi(case.documents), f"seed {seed}"


def test_recorded_cases_have_no_semi_preemptible_workload() -> None:
    for path in case_files():
        case, _ = load_case(path)
        assert not _marked_semi(case.documents), path.name
