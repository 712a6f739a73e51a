"""One cycle's outcome and the cache beside it, for tests of what the status writer writes.

Queue ``root`` -> ``team-q``; in namespace ``team``: ``waits`` (two pods pending, OverLimit),
``runs`` (non-preemptible, one pod running on n1 with 2 GPUs, one pipelined there), and
``half`` (a gang of 3 with one pod created: not ready).
"""

from __future__ import annotations

from typing import Any

from coordinator.coordinator import BindIntent, CycleResult
from coordinator.decisions import Decisions, PodDecision
from k8s_adapter.cache import ClusterCache
from k8s_adapter.kinds import NODES, POD_GROUPS, PODS, PRIORITY_CLASSES, QUEUES
from tests import manifests as m

REASON = "OverLimit: team-q quota has reached the allowable limit of GPUs."


def _uid(obj: dict[str, Any], uid: str) -> dict[str, Any]:
    obj["metadata"]["uid"] = uid
    return obj


def scenario() -> tuple[CycleResult, ClusterCache]:
    cache = ClusterCache()
    cache.on_list(NODES, [m.node("n1", gpu=8)])
    cache.on_list(PRIORITY_CLASSES, [m.priority_class("build", 100)])
    cache.on_list(QUEUES, [m.queue("root"), m.queue("team-q", parent="root")])
    cache.on_list(
        POD_GROUPS,
        [
            _uid(m.pod_group("waits", "team-q", min_member=2), "u-waits"),
            _uid(m.pod_group("runs", "team-q", priority_class_name="build"), "u-runs"),
            _uid(m.pod_group("half", "team-q", min_member=3), "u-half"),
        ],
    )
    cache.on_list(
        PODS,
        [
            _uid(m.pod("waits-0", group="waits", gpu=1), "p-w0"),
            _uid(m.pod("waits-1", group="waits", gpu=1), "p-w1"),
            _uid(m.pod("runs-0", group="runs", gpu=2, cpu="1500m", node_name="n1", phase="Running"), "p-r0"),
            _uid(m.pod("runs-1", group="runs", gpu=2), "p-r1"),
            _uid(m.pod("half-0", group="half", gpu=1), "p-h0"),
        ],
    )
    cache.take_deltas()  # resolves the PodGroups, as the loop does before each cycle
    decisions = Decisions()
    decisions.pods = {
        "team/waits-0": PodDecision("Pending", None, (), REASON),
        "team/waits-1": PodDecision("Pending", None, (), REASON),
        "team/runs-0": PodDecision("Running", "n1"),
        "team/runs-1": PodDecision("Pipelined", "n1"),
        "team/half-0": PodDecision("Pending", None, (), "waiting for the gang's pods to be created (default: 1 of 3)"),
    }
    decisions.pod_groups = {
        "team/waits": PodDecision("Pending", None, (), REASON),
        "team/runs": PodDecision("Running", None),
        "team/half": PodDecision("Pending", None, (), decisions.pods["team/half-0"].reason),
    }
    decisions.queues = {
        name: {"fairShare": {"gpu": 8, "cpu": 8000, "memory": 0}, "allocated": {"gpu": 2, "cpu": 1500, "memory": 0}}
        for name in ("root", "team-q")
    }
    outcome = CycleResult(decisions, binds=[BindIntent("team/runs-1", "n1", (), "r1")])
    outcome.pod_jobs = {key: key.rsplit("-", 1)[0] for key in decisions.pods}
    outcome.pod_queues = dict.fromkeys(decisions.pods, "team-q")
    outcome.not_ready_jobs = frozenset({"team/half"})
    return outcome, cache
