"""Beyond KAI, both off by default: per-job aging (KAI issue #1970) and the expected runtime
policy (KAI issues #904 / #1144)."""

from __future__ import annotations

from kai_ray.model import ClusterSnapshot
from tests.builders import JobSpec, build, node, queue
from tests.timing.helpers import NOW, session, statuses, with_group

HOUR = 3600.0


def starving_case() -> ClusterSnapshot:
    """A 4-GPU job waits an hour while newer 1-GPU jobs of its priority hold the node."""
    return build(
        [node("a", gpu=4)],
        [queue("q", gpu_quota=4)],
        [JobSpec("big", "q", gpu=4, priority=50, created=NOW - HOUR)]
        + [JobSpec(f"small{i}", "q", gpu=1, priority=50, running_on=["a"], created=NOW - 600 + i) for i in range(4)],
    )


def test_without_aging_an_equal_priority_job_never_preempts() -> None:
    decisions = session(starving_case(), ["preempt"])
    assert statuses(decisions, "big") == ["Pending"]


def test_an_aged_job_preempts_newer_jobs_of_its_priority() -> None:
    decisions = session(starving_case(), ["preempt"], jobAging={"interval": "10m", "maxBoost": 3})
    assert statuses(decisions, "big") == ["Pipelined"]
    assert all(statuses(decisions, f"small{i}") == ["Releasing"] for i in range(4))


def test_aging_needs_enough_waiting_and_never_touches_older_jobs() -> None:
    short_wait = with_group(starving_case(), "big", created=NOW - 300)  # less than one interval
    assert statuses(session(short_wait, ["preempt"], jobAging={"interval": "10m"}), "big") == ["Pending"]
    older_runners = build(
        [node("a", gpu=4)],
        [queue("q", gpu_quota=4)],
        [JobSpec("big", "q", gpu=4, priority=50, created=NOW - HOUR)]
        + [JobSpec(f"old{i}", "q", gpu=1, priority=50, running_on=["a"], created=NOW - 2 * HOUR) for i in range(4)],
    )
    assert statuses(session(older_runners, ["preempt"], jobAging={"interval": "1m"}), "big") == ["Pending"]


def test_the_boost_is_capped() -> None:
    """maxBoost 1: an aged priority-50 job may take newer priority-50 jobs, not priority-51 ones."""
    case = build(
        [node("a", gpu=1)],
        [queue("q", gpu_quota=1)],
        [
            JobSpec("old", "q", gpu=1, priority=50, created=NOW - 10 * HOUR),
            JobSpec("newer", "q", gpu=1, priority=51, running_on=["a"], created=NOW - 60),
        ],
    )
    assert statuses(session(case, ["preempt"], jobAging={"interval": "1m", "maxBoost": 1}), "old") == ["Pending"]
    assert statuses(session(case, ["preempt"], jobAging={"interval": "1m", "maxBoost": 2}), "old") == ["Pipelined"]


def test_aging_moves_a_job_ahead_in_its_queue() -> None:
    """Two pending jobs, one GPU free: priority 60 goes first unless the priority-50 one has waited."""
    case = build(
        [node("a", gpu=1)],
        [queue("q", gpu_quota=1)],
        [
            JobSpec("waiting", "q", gpu=1, priority=50, created=NOW - 2 * HOUR),
            JobSpec("fresh", "q", gpu=1, priority=60, created=NOW - 1),
        ],
    )
    assert statuses(session(case, ["allocate"]), "fresh") == ["Binding"]
    aged = session(case, ["allocate"], jobAging={"interval": "10m", "maxBoost": 20})
    assert statuses(aged, "waiting") == ["Binding"] and statuses(aged, "fresh") == ["Pending"]


# ----------------------------------------------------------------------------- expected runtime
def overrun_case() -> ClusterSnapshot:
    case = build(
        [node("a", gpu=2)],
        [queue("q", gpu_quota=2)],
        [
            JobSpec("long", "q", gpu=1, priority=50, running_on=["a"], created=NOW - 3 * HOUR),
            JobSpec("short", "q", gpu=1, priority=50, running_on=["a"], created=NOW - 2 * HOUR),
            JobSpec("next", "q", gpu=1, priority=50, created=NOW - 60),
        ],
    )
    case = with_group(case, "long", last_start=NOW - 3 * HOUR, expected_runtime_seconds=HOUR)
    return with_group(case, "short", last_start=NOW - 2 * HOUR, expected_runtime_seconds=10 * HOUR)


def test_the_expected_runtime_is_ignored_by_default() -> None:
    decisions = session(overrun_case(), ["preempt", "runtimelimit"])
    assert statuses(decisions, "long") == ["Running"] and statuses(decisions, "next") == ["Pending"]


def test_an_overrun_job_is_preempted_first_by_a_job_of_its_priority() -> None:
    decisions = session(overrun_case(), ["preempt"], expectedRuntimeExceeded="preemptFirst")
    assert statuses(decisions, "long") == ["Releasing"]
    assert statuses(decisions, "short") == ["Running"] and statuses(decisions, "next") == ["Pipelined"]


def test_an_overrun_job_is_offered_first_to_reclaim() -> None:
    case = build(
        [node("a", gpu=2)],
        [queue("q1", created=0), queue("q2", created=1)],
        [
            JobSpec("young", "q1", gpu=1, running_on=["a"], created=NOW - 100),  # last in order: KAI's first victim
            JobSpec("overrun", "q1", gpu=1, running_on=["a"], created=NOW - 200),
            JobSpec("wants", "q2", gpu=1, created=NOW - 10),
        ],
    )
    case = with_group(case, "overrun", last_start=NOW - 2 * HOUR, expected_runtime_seconds=HOUR)
    assert statuses(session(case, ["reclaim"]), "young") == ["Releasing"]
    decisions = session(case, ["reclaim"], expectedRuntimeExceeded="preemptFirst")
    assert statuses(decisions, "overrun") == ["Releasing"] and statuses(decisions, "young") == ["Running"]


def test_stop_evicts_overrun_jobs_even_without_contention_or_preemptibility() -> None:
    case = with_group(overrun_case(), "long", preemptible=False)
    decisions = session(case, None, expectedRuntimeExceeded="stop")
    assert statuses(decisions, "long") == ["Releasing"] and statuses(decisions, "short") == ["Running"]
