"""Reservations and backfill (docs/reservation-backfill.md) on random clusters: whatever gangs hold
and whatever jobs backfill, no node is over-committed and no gang is bound in part; and with the
option set but no gang waiting long enough, the decisions are those of the option off."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai_ray.app.runtime import in_process_coordinator
from kai_ray.config import SchedulerConfig
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import ClusterSnapshot
from tests.builders import config
from tests.coordinator.decision_checks import check_decisions
from tests.coordinator.random_clusters import NOW, clusters

ACTIONS = ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")
PROPERTY = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@st.composite
def timed_clusters(draw: st.DrawFn) -> ClusterSnapshot:
    """Random clusters whose jobs sometimes state an expected runtime and a last start."""
    snapshot = draw(clusters())
    groups = []
    for group in snapshot.pod_groups:
        runtime = draw(st.sampled_from((None, 60.0, 600.0, 3600.0)))
        started = draw(st.sampled_from((None, NOW - 30.0, NOW - 500.0)))
        groups.append(replace(group, expected_runtime_seconds=runtime, last_start=started))
    return replace(snapshot, pod_groups=tuple(groups))


def decide(snapshot: ClusterSnapshot, cfg: SchedulerConfig, shards: int = 1) -> object:
    coordinator = in_process_coordinator(cfg, shards)
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    return coordinator.cycle(NOW, ACTIONS).decisions


@PROPERTY
@given(timed_clusters(), st.sampled_from((1, 2)))
def test_reservations_never_over_commit_a_node_or_bind_part_of_a_gang(snapshot: ClusterSnapshot, shards: int) -> None:
    decisions = decide(snapshot, config(reservation={"after": "0s"}), shards)
    check_decisions(snapshot, decisions)  # type: ignore[arg-type]


@settings(PROPERTY, max_examples=60)
@given(timed_clusters())
def test_with_no_gang_past_its_threshold_the_option_changes_nothing(snapshot: ClusterSnapshot) -> None:
    waiting_long = config(reservation={"after": "100000h"})
    assert decide(snapshot, waiting_long) == decide(snapshot, config())
