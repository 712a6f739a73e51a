"""The victim solver's scenario filters: a refused scenario costs no search budget, and a
filter on the seam is asked about every scenario before it is simulated."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.actions import scenario_filters
from coordinator.actions.scenario import Scenario
from coordinator.scheduler import run_session
from coordinator.session import SessionState
from placement.placer import Mask
from tests.builders import JobSpec, build, config, node, queue

NOW = 1_000_000.0


def reclaim_two_gpus():  # type: ignore[no-untyped-def]
    """A full 4-GPU node of q1's one-GPU jobs; q2, owed half, wants one pod of two GPUs: one
    victim frees too little for the idle-GPU filter, two are enough."""
    return build(
        [node("a", gpu=4)],
        [queue("q1", gpu_quota=2, created=0), queue("q2", gpu_quota=2, created=1)],
        [JobSpec(f"hog{i}", "q1", gpu=1, running_on=["a"], created=i) for i in range(4)]
        + [JobSpec("wants", "q2", gpu=2, created=10)],
    )


def test_a_scenario_the_idle_gpu_filter_refuses_spends_no_budget() -> None:
    pods = run_session(reclaim_two_gpus(), config(maxScenariosPerJob=1), NOW, ["reclaim"]).pods
    assert pods["default/wants-0"].status == "Pipelined"
    assert sum(p.status == "Releasing" for p in pods.values()) == 2


def test_a_filter_on_the_seam_is_asked_before_any_scenario_is_simulated(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []

    class RefuseAll:
        def could_ever_pass(self, ceiling: object) -> bool:
            return True

        def passes(self, scenario: Scenario) -> bool:
            asked.append(len(scenario.potential))
            return False

    def refuse_all(state: SessionState, scenario: Scenario, nodes: Mask) -> RefuseAll:
        return RefuseAll()

    monkeypatch.setitem(scenario_filters.SCENARIO_FILTERS, "refuse-all", refuse_all)
    pods = run_session(reclaim_two_gpus(), config(), NOW, ["reclaim"]).pods
    assert pods["default/wants-0"].status == "Pending"
    assert not [k for k, p in pods.items() if p.status == "Releasing"]
    # The idle-GPU filter comes first and refuses the one-victim scenario; the new filter then
    # sees each scenario that passed it, with two victims and more.
    assert asked and min(asked) == 2


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0, 8.0]), min_size=1, max_size=40),
    st.integers(min_value=1, max_value=45),
)
def test_largest_first_is_the_stable_sort_s_start(values: list[float], k: int) -> None:
    """The idle-GPU filter's best nodes, ties included, are those a full stable sort would pick."""
    array = np.array(values)
    expected = np.argsort(-array, kind="stable")[:k]
    assert scenario_filters.largest_first(array, k).tolist() == expected.tolist()


def test_a_whole_node_preemptor_among_spread_jobs_reads_each_victim_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs dealt over the nodes put the first victims in order on different nodes: the search
    pops victims until one node holds four. The step's filters are asked about every scenario it
    grows, and each reads only the victims added since it was last asked; reading them all
    again each time made such a search quadratic in its victims."""
    nodes = ["a", "b", "c", "d"]
    cluster = build(
        [node(n, gpu=4) for n in nodes],
        [queue("q1", created=0)],
        [JobSpec(f"hog{i:02d}", "q1", gpu=1, running_on=[nodes[i % 4]], created=i) for i in range(16)]
        + [JobSpec("whole", "q1", gpu=4, priority=100, preemptible=True, created=20)],
    )
    read: list[int] = []
    victims_after = Scenario.victims_after

    def counting(scenario: Scenario, cursor: object) -> list[object]:
        fresh = victims_after(scenario, cursor)  # type: ignore[arg-type]
        read.append(len(fresh))
        return fresh  # type: ignore[return-value]

    monkeypatch.setattr(Scenario, "victims_after", counting)
    pods = run_session(cluster, config(), NOW, ["preempt"]).pods
    assert pods["default/whole-0"].status == "Pipelined"
    evicted = [p for k, p in pods.items() if p.status == "Releasing"]
    assert len(evicted) == 4 and len({p.node for p in evicted}) == 1
    # 13 victims at most before one node holds four (the last hog of each node comes last);
    # the idle-GPU filter is the only filter here, so it reads no more than that in all.
    assert len(read) > 4 and sum(read) <= 13


def _first_fit_from_the_top(required: list[float], best: list[float]) -> bool:
    """Each pod scanned for from the first node: the rule the filter's shortcut must keep."""
    used = [0.0] * len(best)
    for need in required:
        if need == 0:
            return True
        for i, capacity in enumerate(best):
            if capacity < need:
                return False
            if capacity - used[i] >= need:
                used[i] += need
                break
        else:
            return False
    return True


gpus = st.sampled_from([0.0, 1.0, 2.0, 3.0, 4.0, 8.0])


@given(st.lists(gpus, max_size=12), st.lists(gpus, max_size=12))
@settings(max_examples=400, deadline=None)
def test_the_idle_gpu_filters_first_fit_answers_as_a_scan_from_the_first_node(
    required: list[float], best: list[float]
) -> None:
    required.sort(reverse=True)
    best.sort(reverse=True)
    assert scenario_filters._first_fit(required, best) == _first_fit_from_the_top(required, best)


@pytest.mark.parametrize(
    "pending",
    [
        JobSpec("fractions", "q", pods=2, gpu=0, fraction=0.25, priority=125),
        JobSpec("whole", "q", gpu=1, priority=125),
        JobSpec("gang", "q", pods=3, gpu=2, min_member=3, priority=125),
    ],
    ids=lambda job: job.name,
)
def test_a_cluster_without_nodes_leaves_jobs_pending_with_the_reason(pending: JobSpec) -> None:
    """Before any node has joined (or after the last one left) a victim search has nothing to
    free: the high-priority job waits, saying why, and the session ends normally."""
    snapshot = build(
        [],
        [queue("q", gpu_quota=8)],
        [pending, JobSpec("lost", "q", gpu=0, fraction=0.5, priority=50, running_on=["gone"])],
    )
    decisions = run_session(snapshot, config(), NOW)
    waiting = [d for key, d in decisions.pods.items() if key.startswith(f"default/{pending.name}-")]
    assert waiting and all(d.status == "Pending" for d in waiting)
    assert all("there are no nodes" in d.reason for d in waiting)
