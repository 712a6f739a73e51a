"""Fixtures the coordinator's tests share."""

from __future__ import annotations

import pytest

from coordinator.actions.solver import JobSolver
from coordinator.jobs import Job


@pytest.fixture
def searches(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every victim search the tests' sessions start, as (action, job key), in order."""
    started: list[tuple[str, str]] = []
    solve = JobSolver.solve

    def noting_solve(solver: JobSolver, job: Job) -> bool:
        started.append((solver.action, job.key))
        return solve(solver, job)

    monkeypatch.setattr(JobSolver, "solve", noting_solve)
    return started
