"""An action that raises costs the session its own uncommitted work, not every decision: the
actions before and after it decide as usual and the failure is reported in the cycle's stats.
Tests run with KAI_RAY_RAISE_ACTION_ERRORS set (tests/conftest.py); these take it away."""

from __future__ import annotations

from dataclasses import replace

import pytest

from coordinator.action_shares import RAISE_ACTION_ERRORS
from coordinator.actions.allocate import AllocateAction, allocate_job, eligible_jobs
from coordinator.actions.node_holds import HeldNodes
from coordinator.actions.preempt import PreemptAction
from coordinator.coordinator import CycleResult
from coordinator.jobs import Job
from coordinator.session import SessionState
from coordinator.statement import Statement
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import ClusterSnapshot
from tests.builders import JobSpec, build, config, node, queue

NOW = 1_000_000.0
ACTIONS = ("allocate", "preempt", "stalegangeviction")


def _cluster() -> ClusterSnapshot:
    """One job allocate can place, one that waits for preempt (node a is then full, b runs a
    lower-priority job), and a stale gang to evict after it."""
    snapshot = build(
        [node("a", gpu=2), node("b", gpu=2)],
        [queue("q", gpu_quota=6)],
        [
            JobSpec("fits", "q", gpu=1, created=1.0),
            JobSpec("low", "q", gpu=2, priority=50, running_on=["b"], created=0.0),
            JobSpec("urgent", "q", gpu=2, priority=125, created=2.0),
            JobSpec("broken", "q", pods=3, gpu=1, running_on=["a"], created=0.5),
        ],
    )
    groups = tuple(replace(g, stale_since=NOW - 120) if g.name == "broken" else g for g in snapshot.pod_groups)
    return replace(snapshot, pod_groups=groups)


def _place_then_fail(self: PreemptAction, state: SessionState, stmt: Statement) -> None:
    """A preempt with a bug: it evicts a victim and places the job it works on, then raises
    before committing."""
    job = next(j for j in eligible_jobs(state, pending_only=True) if j.key == "default/urgent")
    state.every_node()
    stmt.evict(state.tasks["default/low-0"], "preempt", job.key)
    assert allocate_job(state, stmt, job, pipeline_only=False, real=True)
    raise IndexError("index 0 is out of bounds for axis 0 with size 0")


def _cycle(snapshot: ClusterSnapshot) -> CycleResult:
    coordinator = in_process_coordinator(config(), 2)
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    return coordinator.cycle(NOW, ACTIONS)


def test_a_failing_action_is_rolled_back_and_the_others_still_decide(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(RAISE_ACTION_ERRORS)
    monkeypatch.setattr(PreemptAction, "execute", _place_then_fail)
    result = _cycle(_cluster())
    pods = result.decisions.pods
    assert pods["default/fits-0"].status == "Binding"  # allocate, before it
    assert pods["default/broken-0"].status == "Releasing"  # stale gang eviction, after it
    assert pods["default/urgent-0"].status == "Pending"  # what preempt placed is undone,
    assert pods["default/low-0"].status == "Running"  # and what it evicted
    assert "default/urgent-0" not in {bind.pod for bind in result.binds}
    assert result.stats.failed_actions == {"preempt": "IndexError: index 0 is out of bounds for axis 0 with size 0"}
    assert "the preempt action failed" in caplog.text


def test_with_the_variable_set_the_error_fails_the_session(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RAISE_ACTION_ERRORS, "1")
    monkeypatch.setattr(PreemptAction, "execute", _place_then_fail)
    with pytest.raises(IndexError):
        _cycle(_cluster())


def test_a_job_an_action_fails_on_is_set_aside_and_the_jobs_after_it_still_decide(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Allocate raises while deciding one gang: that gang waits with a reason naming the error,
    and the jobs ordered after it are placed in the same cycle (before, they all waited)."""
    monkeypatch.delenv(RAISE_ACTION_ERRORS)
    attempt = AllocateAction._attempt

    def fail_on_bad(state: SessionState, stmt: Statement, job: Job, holds: HeldNodes) -> tuple[bool, bool]:
        if job.key == "default/bad":
            raise KeyError("a state no test reached")
        return attempt(state, stmt, job, holds)

    monkeypatch.setattr(AllocateAction, "_attempt", staticmethod(fail_on_bad))
    jobs = [
        JobSpec("first", "q", gpu=1, created=0.0),
        JobSpec("bad", "q", pods=2, gpu=1, created=1.0),
        *(JobSpec(f"later-{i}", "q", pods=2, gpu=1, created=2.0 + i) for i in range(3)),
    ]
    snapshot = build([node("a", gpu=4), node("b", gpu=4)], [queue("q", gpu_quota=8)], jobs)
    for shards in (1, 2):
        result = _cycle_with(snapshot, shards, ("allocate",))
        pods = result.decisions.pods
        bound = {bind.pod for bind in result.binds}
        assert bound == {"default/first-0"} | {f"default/later-{i}-{k}" for i in range(3) for k in range(2)}
        assert pods["default/bad-0"].status == "Pending"
        assert "kai-ray failed while deciding this job (KeyError: 'a state no test reached')" in (
            pods["default/bad-0"].reason
        )
        assert result.stats.failed_actions == {"allocate": "KeyError: 'a state no test reached'"}
    assert "it runs again without that job" in caplog.text


def _cycle_with(snapshot: ClusterSnapshot, shards: int, actions: tuple[str, ...]) -> CycleResult:
    coordinator = in_process_coordinator(config(), shards)
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    return coordinator.cycle(NOW, actions)
