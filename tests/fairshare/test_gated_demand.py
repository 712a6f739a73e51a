"""Gated pods' demand in their queues' fair-share request (KAI's queue-admission design: counted
exactly like pending demand), while the pods stay out of the session."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from coordinator.cluster_model import ClusterModel
from coordinator.gated_demand import gated_demand
from coordinator.session import SessionState
from coordinator.session_cache import SessionCache
from coordinator.session_open import open_session
from kai_ray import labels as L
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import ClusterSnapshot, Pod, PodState
from placement.node_table import NodeTable
from placement.placer import Placer
from placement.shapes import ResourceSchema
from tests.builders import JobSpec, build, config, node, queue

NOW = 1_000_000.0
FOREIGN_GATE = "example.com/wait"


def gated(snapshot: ClusterSnapshot, job: str, *gates: str) -> ClusterSnapshot:
    """The snapshot with the pods of ``job`` created with ``gates``."""
    pods = tuple(replace(p, scheduling_gates=gates) if p.pod_group == job else p for p in snapshot.pods)
    return replace(snapshot, pods=pods)


def cluster(backlog_gates: tuple[str, ...] = (L.ADMISSION_GATE,)) -> ClusterSnapshot:
    """8 GPUs, two queues with no quota: ``a`` runs 2 GPUs and has 6 more waiting at the gate,
    ``b`` has 8 pending."""
    snapshot = build(
        [node("n1", gpu=8)],
        [queue("a"), queue("b")],
        [
            JobSpec("run", "a", pods=2, running_on=["n1", "n1"]),
            JobSpec("backlog", "a", pods=6, min_member=1),
            JobSpec("wants", "b", pods=8, min_member=1),
        ],
    )
    return gated(snapshot, "backlog", *backlog_gates) if backlog_gates else snapshot


def model_of(snapshot: ClusterSnapshot) -> ClusterModel:
    model = ClusterModel()
    model.apply(ClusterDeltas.of_snapshot(snapshot))
    return model


def cached_session(model: ClusterModel) -> SessionState:
    """The live coordinator's session (kept across cycles, placing through the shards)."""
    return SessionCache(config()).open(model, NOW, NodeTable(ResourceSchema()), Placer)


def fresh_session(model: ClusterModel) -> SessionState:
    """The session opened from scratch on every node (the coordinator's path when DRA is in use)."""
    return open_session(model.snapshot(), config(), NOW, gated=tuple(model.gated.values()))


def gpu(state: SessionState, figure: str) -> dict[str, float]:
    queues = state.queues
    values = getattr(queues, figure)
    return {name: float(values[queues.tree.index[name], 0]) for name in ("a", "b")}


@pytest.mark.parametrize("opened", [cached_session, fresh_session])
def test_a_gated_backlog_counts_in_its_queues_request_and_fair_share(opened: object) -> None:
    model = model_of(cluster())
    state = opened(model)  # type: ignore[operator]
    assert gpu(state, "request") == {"a": 8.0, "b": 8.0}
    assert gpu(state, "fair_share") == {"a": 4.0, "b": 4.0}  # the same as if the backlog were pending
    # Never a task: nothing in the session can place or bind a gated pod, nor reclaim for it.
    assert not any(key.startswith("default/backlog") for key in state.tasks)
    assert gpu(state, "allocated") == {"a": 2.0, "b": 0.0}


@pytest.mark.parametrize("opened", [cached_session, fresh_session])
def test_the_fair_share_with_a_gated_backlog_is_the_one_with_it_pending(opened: object) -> None:
    with_gate = opened(model_of(cluster()))  # type: ignore[operator]
    pending = opened(model_of(cluster(backlog_gates=())))  # type: ignore[operator]
    assert np.array_equal(with_gate.queues.fair_share, pending.queues.fair_share)
    assert np.array_equal(with_gate.queues.request, pending.queues.request)


@pytest.mark.parametrize("opened", [cached_session, fresh_session])
def test_a_backlog_held_by_another_gate_does_not_count(opened: object) -> None:
    for gates in ((FOREIGN_GATE,), (L.ADMISSION_GATE, FOREIGN_GATE)):
        state = opened(model_of(cluster(backlog_gates=gates)))  # type: ignore[operator]
        assert gpu(state, "request") == {"a": 2.0, "b": 8.0}
        assert gpu(state, "fair_share") == {"a": 2.0, "b": 6.0}


def test_gated_demand_rolls_up_to_the_parent_queues() -> None:
    snapshot = build(
        [node("n1", gpu=8)],
        [queue("top"), queue("a", parent="top"), queue("b")],
        [JobSpec("backlog", "a", pods=3, min_member=1)],
    )
    state = cached_session(model_of(gated(snapshot, "backlog", L.ADMISSION_GATE)))
    index = state.queues.tree.index
    assert state.queues.request[index["a"], 0] == 3.0 and state.queues.request[index["top"], 0] == 3.0
    assert state.queues.request[index["b"], 0] == 0.0


def pod(name: str, **changes: object) -> Pod:
    """A 2-GPU pod of group ``g`` held by kai-ray's gate, with ``changes``."""
    base = build([], [], [JobSpec("g", "a", gpu=2)]).pods[0]
    fields: dict[str, object] = {"name": name, "scheduling_gates": (L.ADMISSION_GATE,), **changes}
    return replace(base, **fields)  # type: ignore[arg-type]


def test_only_our_pending_pods_held_by_our_gate_alone_in_an_existing_group_count() -> None:
    group = build([], [queue("a")], [JobSpec("g", "a")]).pod_groups[0]
    pods = [
        pod("counts"),
        pod("foreign-gate", scheduling_gates=(L.ADMISSION_GATE, FOREIGN_GATE)),
        pod("other-scheduler", scheduler_name="default-scheduler"),
        pod("deleting", state=PodState.RELEASING),
        pod("no-group", pod_group=None),
        pod("missing-group", pod_group="gone"),
    ]
    demand = gated_demand(pods, {group.key: group}, L.DEFAULT_SCHEDULER_NAME)
    assert demand == {"a": (2.0, 1000.0, 2**30)}
