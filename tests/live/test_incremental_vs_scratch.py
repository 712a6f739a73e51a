"""Incremental equals from-scratch: seeded churn against the dev cluster while ``kai-ray run``'s
loop schedules it; at every quiet point the running scheduler's view must equal a fresh
``kai-ray schedule --snapshot`` of the same objects, and no node is over-committed, no gang
bound partially, no pod bound twice. A failure names its seed; ``python -m tests.live.churn
--seed N`` runs that seed again, and a longer run is one command (tests/live/README.md)."""

from __future__ import annotations

import pytest

from tests.live.churn import report, run_seed

CI_SEEDS = range(1, 11)  # about a minute on two busy cores; the long run covers thousands more changes


@pytest.mark.parametrize("seed", CI_SEEDS)
async def test_the_running_scheduler_equals_a_fresh_session_at_every_quiet_point(seed: int) -> None:
    findings = await run_seed(seed, rounds=3, steps=25)
    assert findings.quiet_points == 3, report(findings)
    assert not findings.problems, report(findings)
    assert findings.binds > 0 and findings.cycles > 0  # it did schedule: the comparison was not of an idle cluster
