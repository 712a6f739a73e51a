"""A statement rolled back leaves the session as it found it, whatever its operations did to the
same pod in between: a pod placed and then evicted by the same uncommitted statement (a scenario
that takes back what it tried) is un-evicted and then un-placed."""

from __future__ import annotations

import numpy as np

from coordinator.session_open import open_session
from coordinator.statement import Statement
from coordinator.tasks import Status
from placement.holdings import Kind
from placement.placer import Choice
from tests.builders import JobSpec, build, config, node, queue

NOW = 1_000_000.0


def test_a_pod_placed_then_evicted_in_one_statement_is_rolled_back_to_pending() -> None:
    snapshot = build([node("n", gpu=8)], [queue("team-a", gpu_quota=8)], [JobSpec("train", "team-a", pods=1)])
    state = open_session(snapshot, config(), NOW)
    queues, leaf = state.queues, state.queues.tree.index["team-a"]
    [task] = state.jobs["default/train"].tasks
    held_before = state.table.held.copy()
    stmt = Statement(state.table, queues, state.jobs_by_task)

    stmt.place(task, Choice(0, False, ()), state.accepted_quota(task, 0))
    stmt.evict(task, "reclaim", None)
    assert task.status is Status.RELEASING and queues.allocated[leaf][0] == 0
    assert state.table.held[Kind.RELEASING, 0].sum() > 0
    stmt.rollback()

    assert (task.status, task.node, task.holdings) == (Status.PENDING, None, [])
    assert queues.allocated[leaf][0] == 0
    assert np.array_equal(state.table.held, held_before)
