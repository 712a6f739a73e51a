"""Stale-gang eviction and the per-PodGroup grace period, rule by rule from KAI's
docs/staleness-grace-period, including the clock the adapter keeps on the PodGroup."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kai_ray.app.runtime import in_process_coordinator
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import ClusterSnapshot, PodState
from tests.builders import JobSpec, build, config, node, queue
from tests.timing.helpers import NOW, session, statuses, with_group


def stale_case(stale_for: float | None, grace: float | None = None) -> ClusterSnapshot:
    """A 3-pod gang (minimum 3) with 2 pods left running: below its minimum."""
    case = build([node("a", gpu=4)], [queue("q", gpu_quota=4)], [JobSpec("gang", "q", pods=3, running_on=["a", "a"])])
    since = None if stale_for is None else NOW - stale_for
    return with_group(case, "gang", stale_since=since, staleness_grace_seconds=grace)


@pytest.mark.parametrize(("stale_for", "evicted"), [(50, False), (61, True)])
def test_the_default_grace_is_sixty_seconds(stale_for: float, evicted: bool) -> None:
    result = statuses(session(stale_case(stale_for), ["stalegangeviction"]), "gang")
    assert result[:2] == (["Releasing"] * 2 if evicted else ["Running"] * 2)


def test_a_pod_group_grace_period_overrides_the_default() -> None:
    assert statuses(session(stale_case(40, grace=30), ["stalegangeviction"]), "gang")[:2] == ["Releasing"] * 2
    assert statuses(session(stale_case(90, grace=120), ["stalegangeviction"]), "gang")[:2] == ["Running"] * 2


def test_a_negative_grace_period_disables_stale_eviction_for_the_group() -> None:
    assert statuses(session(stale_case(10**6, grace=-1), ["stalegangeviction"]), "gang")[:2] == ["Running"] * 2


def test_the_scheduler_default_is_configurable() -> None:
    decisions = session(stale_case(100), ["stalegangeviction"], defaultStalenessGracePeriod="5m")
    assert statuses(decisions, "gang")[:2] == ["Running"] * 2


def test_the_clock_starts_when_the_gang_breaks_and_stops_when_it_is_whole_again() -> None:
    """The first session that sees the gang below its minimum records the time (the adapter
    writes it as kai.scheduler/stale-podgroup-timestamp); a whole gang clears it."""
    coordinator = in_process_coordinator(config())
    snapshot = stale_case(None)
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    first = coordinator.cycle(NOW, ["stalegangeviction"])
    assert first.job_clocks["default/gang"].stale_since == NOW
    assert not first.evictions
    second = coordinator.cycle(NOW + 30, ["stalegangeviction"])
    assert "default/gang" not in second.job_clocks and not second.evictions  # unchanged, within grace
    third = coordinator.cycle(NOW + 61, ["stalegangeviction"])
    assert sorted(e.pod for e in third.evictions) == ["default/gang-0", "default/gang-1"]
    assert third.job_clocks["default/gang"].last_eviction == NOW + 61

    healed = build([node("a", gpu=4)], [queue("q", gpu_quota=4)], [JobSpec("ok", "q", pods=2, running_on=["a", "a"])])
    coordinator = in_process_coordinator(config())
    coordinator.apply(ClusterDeltas.of_snapshot(with_group(healed, "ok", stale_since=NOW - 5)))
    assert coordinator.cycle(NOW, ["stalegangeviction"]).job_clocks["default/ok"].stale_since is None


def test_a_succeeded_pod_makes_the_gang_not_stale() -> None:
    case = stale_case(10**4)
    pods = tuple(replace(p, state=PodState.SUCCEEDED) if p.name == "gang-2" else p for p in case.pods)
    decisions = session(replace(case, pods=pods), ["stalegangeviction"])
    assert statuses(decisions, "gang") == ["Running", "Running", "Succeeded"]
