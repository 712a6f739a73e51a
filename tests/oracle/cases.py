"""Case files: a small cluster, how it is scheduled, and what KAI (and kai-ray) decided on it.

Every disagreement the differential run found was shrunk to one of these and kept in
``tests/oracle/cases/``. A case file is YAML:

    title: one line
    verdict: fixed | deliberate | kai-bug
                                     # fixed: kai-ray now decides as KAI; deliberate: README entry;
                                     # kai-bug: KAI v0.12 decides as kai-ray once ``fix`` is on
    fix: evicted-pipelined           # kai-bug only: the fixes (tests/oracle/kai_fixes.py), "+"-joined
    actions: reclaim
    now: 2025-06-01T12:00:00Z
    config: {...}                    # kai-ray's config
    kai: {default/pod: Status node}  # KAI's decision per pod, as the oracle printed it
    kai_ray: {...}                   # deliberate and kai-bug: kai-ray's decision where it differs
    cluster: [manifests]

The default test run replays each case through kai-ray (no Go needed); the oracle tier
also re-runs KAI on it, so a recorded KAI decision cannot go stale.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.oracle.kai_fixes import named_fixes
from tests.oracle.manifests import Case

CASES = Path(__file__).resolve().parent / "cases"


def decisions(outcome: dict[str, Any]) -> dict[str, str]:
    """Pod -> "Status node" (node "-" when none)."""
    return {key: f"{pod['status']} {pod.get('node') or '-'}" for key, pod in sorted(outcome["pods"].items())}


def disagreement(kai: dict[str, Any] | None, ray: dict[str, Any]) -> set[tuple[str, str, str]]:
    """The pods whose status the two schedulers disagree on: (pod, KAI's status, kai-ray's)."""
    if kai is None:
        return set()
    theirs, ours = decisions(kai), decisions(ray)
    statuses = {pod: (theirs.get(pod, "-").split()[0], ours.get(pod, "-").split()[0]) for pod in theirs | ours}
    return {(pod, k, r) for pod, (k, r) in statuses.items() if k != r}


def write_case(
    path: Path, case: Case, kai: dict[str, Any], ray: dict[str, Any], diffs: list[str], found: str = "mismatch"
) -> None:
    """Write a shrunk disagreement; ``found`` is the tier's verdict on it ("kai-bug:<fixes>" is
    kept as the case's verdict and fix, anything else is left for a person to decide)."""
    kai_decisions, ray_decisions = decisions(kai), decisions(ray)
    fixes = named_fixes(found)
    document: dict[str, Any] = {
        "title": f"{case.case_id}: {diffs[0] if diffs else 'no difference'}",
        "verdict": "kai-bug" if fixes else "undecided",
        **({"fix": "+".join(fixes)} if fixes else {}),
        "actions": case.actions,
        "now": case.now,
        "config": case.config,
        "kai": kai_decisions,
        "kai_ray": {k: v for k, v in ray_decisions.items() if kai_decisions.get(k) != v},
        "cluster": case.documents,
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False, width=120))


def load_case(path: Path) -> tuple[Case, dict[str, Any]]:
    data = yaml.safe_load(path.read_text())
    case = Case(
        seed=0,
        focus=path.stem,
        documents=data["cluster"],
        config=data.get("config") or {},
        actions=data["actions"],
        now=data["now"],
    )
    return case, data


def case_files() -> list[Path]:
    return sorted(CASES.glob("*.yaml"))
