"""The victim search's indexes (``actions/victims.py``) are kept by re-placing only the jobs a
commit touched; after any run of evictions, placements, rollbacks and commits they must equal
indexes built afresh from the session as it then is."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.actions.allocate import allocate_job
from coordinator.actions.victims import SortedJobs, VictimPool, pending_pool
from coordinator.session import SessionState
from coordinator.session_open import open_session
from coordinator.statement import Statement
from tests.builders import JobSpec, build, config, node, queue

NOW = 1_000_000.0


def _session(seed: int) -> SessionState:
    nodes = [node(f"n{i}", gpu=4) for i in range(4)]
    queues = [queue("q1", gpu_quota=8, created=0), queue("q2", gpu_quota=8, created=1)]
    jobs = []
    for i in range(12):  # running jobs of both queues, some elastic, some high priority
        where = f"n{(i + seed) % 4}"
        pods = 1 + (i + seed) % 2
        jobs.append(
            JobSpec(
                f"run{i}",
                f"q{1 + i % 2}",
                pods=pods,
                min_member=1,
                running_on=[where] * pods,
                priority=50 if i % 3 else 100,
                created=float((i * 7 + seed) % 5),
            )
        )
    jobs += [JobSpec(f"wait{i}", f"q{1 + (i + seed) % 2}", pods=1 + i % 2, created=10.0 + i) for i in range(6)]
    return open_session(build(nodes, queues, jobs), config(), NOW)


def _lists(index: SortedJobs) -> dict[str, list[str]]:
    return {queue: [entry[2].key for entry in entries] for queue, entries in index.by_queue().items()}


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 3),
    steps=st.lists(
        st.tuples(st.sampled_from(["evict", "place", "rollback", "commit"]), st.integers(0, 99)), max_size=25
    ),
)
def test_indexes_kept_across_commits_equal_indexes_built_afresh(seed: int, steps: list[tuple[str, int]]) -> None:
    state = _session(seed)
    stmt = Statement(state.table, state.queues, state.jobs_by_task)
    victims, pending = VictimPool(VictimPool.sorted_jobs(state)), pending_pool(state)
    victims.jobs.by_queue(), pending.by_queue()  # built before anything changes
    stmt.take_changed()
    checkpoint = stmt.checkpoint()
    for op, pick in steps:
        if op == "evict":
            # victims run since before the session, as the actions' victims do
            running = [t for t in state.tasks.values() if t.status.active_allocated and t.original_status.active_used]
            if running:
                stmt.evict(running[pick % len(running)], "reclaim", None)
        elif op == "place":
            waiting = [j for j in state.jobs.values() if j.has_pending()]
            if waiting:
                allocate_job(state, stmt, waiting[pick % len(waiting)], pipeline_only=True, real=False)
        elif op == "rollback":
            stmt.rollback(checkpoint)
        else:
            stmt.commit()
            changed = stmt.take_changed()
            victims.refresh(changed)
            pending.refresh(changed)
            checkpoint = stmt.checkpoint()
            assert _lists(victims.jobs) == _lists(VictimPool.sorted_jobs(state))
            assert _lists(pending) == _lists(pending_pool(state))
