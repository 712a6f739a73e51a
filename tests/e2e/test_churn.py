"""Incremental equals from-scratch on the real-cluster tier: the seeded churn of tests/live run
against etcd, kube-apiserver, kube-controller-manager and kwok (``tests/e2e/real_churn.py``).
A failure names its seed; the dev cluster's churn (tests/live) covers the faults and fractions
a real apiserver cannot be made to show."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.backends import Backend
from tests.e2e.real_churn import run_real_seed
from tests.live.churn import report

SEEDS = range(1, 7)  # about 12 s each; 30 seeds (6 minutes) found no difference after the binder fix
ROUNDS = 3


@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", SEEDS)
async def test_the_running_scheduler_equals_a_fresh_session_on_a_real_cluster(
    real: Backend, seed: int, tmp_path: Path
) -> None:
    findings = await run_real_seed(real, seed, tmp_path, rounds=ROUNDS, steps=20)
    assert findings.quiet_points == ROUNDS, report(findings)
    assert not findings.problems, report(findings)
    assert findings.binds > 0 and findings.cycles > 0  # it did schedule: not an idle cluster compared
