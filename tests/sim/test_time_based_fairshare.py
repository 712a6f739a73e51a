"""KAI's time-based fair-share example (docs/time-based-fairshare) reproduced by the simulator:
two queues of one department, no quota, weight 1, a 16-GPU node, backlogs of 16-GPU single-pod
jobs; KAI's simulator settings (window 256 cycles, half-life 128, kValue 1, 1024 cycles) with a
cycle of 10 simulated seconds.

KAI's plot: after a quick start the node changes hands at cycles ~80, ~322, ~565 and ~805; the
queue waiting for it takes it when its fair share reaches all 16 GPUs, and the fair shares move
in mirror image. Without usage one queue keeps the node for good.
"""

from __future__ import annotations

import pytest

from kai_ray.app.sim import scenarios
from kai_ray.app.sim.report import SimMetrics
from kai_ray.app.sim.run import SimulationRun
from kai_ray.config import SchedulerConfig

KAI_SWITCHES = (805.0, 3225.0, 5650.0, 8050.0)  # KAI's plot, cycles x 10 s


def simulate(monkeypatch: pytest.MonkeyPatch, config: SchedulerConfig | None) -> SimMetrics:
    # Five jobs a queue are as good as a hundred: jobs never finish, evicted ones come back.
    small = lambda seed: scenarios.kai_time_based_fairshare(seed, jobs_per_queue=5)  # noqa: E731
    monkeypatch.setitem(scenarios.SCENARIOS, "kai-time-based-fairshare", small)
    return (
        SimulationRun(
            config or SchedulerConfig(),
            nodes=1,
            jobs=None,
            shards=1,
            hours=scenarios.CYCLES * scenarios.PERIOD / 3600,
            period=scenarios.PERIOD,
            progress=False,
            scenario="kai-time-based-fairshare",
            config_given=config is not None,
        )
        .execute()
        .metrics
    )


def handovers(metrics: SimMetrics) -> list[tuple[float, str]]:
    """(time, queue) whenever the node's holder changes."""
    out: list[tuple[float, str]] = []
    for t, allocated, _ in metrics.queue_timeline["team-a"]:
        holder = "team-a" if allocated == 16 else "team-b"
        if not out or out[-1][1] != holder:
            out.append((t, holder))
    return out


@pytest.mark.timeout(240)
def test_the_node_changes_hands_when_kai_s_plot_says(monkeypatch: pytest.MonkeyPatch) -> None:
    metrics = simulate(monkeypatch, None)
    later = [(t, q) for t, q in handovers(metrics) if t > 100]  # the first minute flips, as KAI's does
    assert [q for _, q in later] == ["team-b", "team-a", "team-b", "team-a"][: len(later)]
    assert len(later) == 4
    for (t, _), expected in zip(later, KAI_SWITCHES, strict=True):
        assert abs(t - expected) <= 120, (t, expected)

    a, b = metrics.queue_timeline["team-a"], metrics.queue_timeline["team-b"]
    for (_t, alloc_a, fair_a), (_, alloc_b, fair_b) in zip(a, b, strict=True):
        assert alloc_a + alloc_b == 16  # the node is never idle
        if fair_a + fair_b:
            assert fair_a + fair_b == 16  # the fair shares divide the whole node
    by_time = {t: (fa, fb) for (t, _, fa), (_, _, fb) in zip(a, b, strict=True)}
    for t, taker in later:  # the waiting queue takes it back in the cycle its fair share is the whole node
        before = max(s for s in by_time if s < t)
        assert by_time[t][0 if taker == "team-a" else 1] == 16
        assert by_time[before][0 if taker == "team-a" else 1] < 16

    hours = {q: metrics.gpu_hours(q) for q in ("team-a", "team-b")}
    assert 0.45 <= hours["team-a"] / sum(hours.values()) <= 0.55  # the GPU-hours converge to half each


@pytest.mark.timeout(240)
def test_without_usage_one_queue_keeps_the_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """KAI's strict-DRF figure: equal fair shares (8 and 8) and nothing to reclaim."""
    metrics = simulate(monkeypatch, SchedulerConfig())
    assert handovers(metrics) == [(0.0, "team-a")]
    assert {f for _, _, f in metrics.queue_timeline["team-b"]} == {8.0}
    assert metrics.usage is None
