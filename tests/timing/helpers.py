"""Shared helpers of the timing scenarios: a fixed clock and pod-group edits on snapshots."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from coordinator.decisions import Decisions
from coordinator.scheduler import run_session
from kai_ray.model import ClusterSnapshot
from tests.builders import config

NOW = 1_000_000.0


def with_group(snapshot: ClusterSnapshot, job: str, **changes: Any) -> ClusterSnapshot:
    """``snapshot`` with pod group ``job`` changed (e.g. ``last_start=NOW - 60``)."""
    groups = tuple(replace(g, **changes) if g.name == job else g for g in snapshot.pod_groups)
    return replace(snapshot, pod_groups=groups)


def session(snapshot: ClusterSnapshot, actions: list[str] | None, **cfg: object) -> Decisions:
    return run_session(snapshot, config(**cfg), NOW, actions)


def statuses(decisions: Decisions, job: str) -> list[str]:
    return [p.status for key, p in sorted(decisions.pods.items()) if key.startswith(f"default/{job}-")]
