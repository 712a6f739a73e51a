"""The kwok load test's arrivals mode against the real control plane, at a tiny size: kai-ray at its
defaults started on a cluster of nodes alone, pods created in batches while it runs, every one
bound and the window's figures consistent. (CI's `python -m loadtests.kwok_load --quick` runs
both modes at their reduced sizes; this checks the mode's mechanics where a failure is a test's.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtests.kwok_arrivals import arrival_pods, run_arrivals
from loadtests.kwok_phase import KAI

PODS = 40


@pytest.mark.timeout(300)
async def test_pods_created_in_batches_while_kai_ray_runs_are_all_bound(binaries: Path) -> None:
    result = await run_arrivals("arrivals e2e", KAI, 12, arrival_pods(PODS, KAI), batch=15)
    assert result.errors == []
    assert result.bound == result.pods == PODS
    assert 0 < result.created_in <= result.all_bound_at
    assert len(result.latencies) == PODS
    # The window holds the creates (three batches) and the binds, and not the probe pod's.
    assert result.requests_by_kind.get("POST pods") == PODS
    assert result.requests_by_kind.get("POST pods/binding", 0) >= PODS
    assert result.log is not None and result.log.cycle_binds >= PODS  # kai-ray's log over the window, read back
    assert result.steps.get("cycle", (0, 0.0))[0] > 0
    assert result.cpu_seconds.get("scheduler", 0.0) > 0
