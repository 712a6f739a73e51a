"""Reclaim, preempt and consolidation under topology constraints: a victim set only counts when
it frees room inside one domain of the preemptor's required level, and a constrained job that is
moved stays in its domain."""

from __future__ import annotations

from typing import Any

from coordinator.decisions import Decisions
from tests.topology.cluster import PRIORITY_CLASSES, TOPOLOGY, Job, Pod, decide_docs, job_docs, node, topology

RACK = "t/rack"
ALL = {"quota": -1, "limit": -1, "overQuotaWeight": 1}


def queue(name: str, parent: str | None, gpus: float) -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": {"gpu": {**ALL, "quota": gpus}, "cpu": ALL, "memory": ALL}}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def required_rack(**extra: Any) -> dict[str, Any]:
    return {"topologyConstraint": {"topology": TOPOLOGY, "requiredTopologyLevel": RACK}, **extra}


RACKS = {"a1": "r1", "b1": "r2", "b2": "r2"}


def four_gpu_cluster(victim_queue: str, victim_class: str, quotas: tuple[int, int] = (4, 4)) -> list[dict[str, Any]]:
    """Rack r1 is one 4-GPU node, rack r2 two 2-GPU nodes; eight one-GPU victims fill them,
    started alternately on both racks so that the victims queue mixes racks."""
    docs: list[dict[str, Any]] = [
        *PRIORITY_CLASSES,
        queue("root", None, -1),
        queue("team-a", "root", quotas[0]),
        queue("team-b", "root", quotas[1]),
        topology((RACK,)),
        node("a1", 4, {RACK: "r1"}),
        node("b1", 2, {RACK: "r2"}),
        node("b2", 2, {RACK: "r2"}),
    ]
    for i, where in enumerate(["a1", "b1", "a1", "b2", "a1", "b1", "a1", "b2"]):
        job = Job(f"victim{i}", 1, (Pod(node=where),), {"minMember": 1}, victim_class, victim_queue)
        docs += job_docs(job, i)
    return docs


def outcome(decisions: Decisions, prefix: str) -> tuple[set[str], set[str], set[str]]:
    """(racks of the evicted pods, racks the gang is placed on, statuses of the gang's pods)."""
    evicted = {RACKS[d.node] for k, d in decisions.pods.items() if d.status == "Releasing" and d.node}
    gang = [d for k, d in decisions.pods.items() if k.startswith(f"default/{prefix}")]
    return evicted, {RACKS[d.node] for d in gang if d.node}, {d.status for d in gang}


def test_reclaim_evicts_only_inside_the_rack_the_gang_will_use() -> None:
    docs = four_gpu_cluster("team-b", "train")
    spread = decide_docs(
        [*docs, *job_docs(Job("gang", 1, (Pod(),) * 4, {"minMember": 4}, queue="team-a"), 20)], ("allocate", "reclaim")
    )
    evicted, used, _ = outcome(spread, "gang")
    assert evicted == {"r1", "r2"} and used == {"r1", "r2"}  # unconstrained: the first victims found, on both racks

    gang = Job("gang", 1, (Pod(),) * 4, required_rack(minMember=4), queue="team-a")
    evicted, used, statuses = outcome(decide_docs([*docs, *job_docs(gang, 20)], ("allocate", "reclaim")), "gang")
    assert statuses == {"Pipelined"}  # placed on what the victims free
    assert len(used) == 1 and evicted == used  # every victim is in the rack the gang goes to


def test_preempt_evicts_only_inside_the_rack_the_gang_will_use() -> None:
    docs = four_gpu_cluster("team-a", "train")
    gang = Job("urgent", 1, (Pod(),) * 4, required_rack(minMember=4), "build", "team-a")
    evicted, used, statuses = outcome(decide_docs([*docs, *job_docs(gang, 20)], ("allocate", "preempt")), "urgent")
    assert statuses == {"Pipelined"} and len(used) == 1 and evicted == used


def test_no_victim_set_helps_when_no_rack_could_ever_hold_the_gang() -> None:
    docs = four_gpu_cluster("team-b", "train", quotas=(5, 3))
    gang = Job("gang", 1, (Pod(),) * 5, required_rack(minMember=5), queue="team-a")
    decisions = decide_docs([*docs, *job_docs(gang, 20)], ("allocate", "reclaim"))
    evicted, used, statuses = outcome(decisions, "gang")
    assert evicted == set() and used == set() and statuses == {"Pending"}  # 8 GPUs free up, but never 5 in a rack
    reason = decisions.pod_groups["default/gang"].reason
    assert "no rack has 5 GPUs free for the 5 pods; best rack r1 has 0 (room for 0 of the pods)" in reason, reason


def test_consolidation_moves_a_constrained_job_only_within_its_rack() -> None:
    """A running gang that must stay in one rack is spread over r1's two nodes; a 2-GPU pod needs a
    whole node. Consolidation may move the gang, but only to nodes of r1."""
    docs: list[dict[str, Any]] = [
        *PRIORITY_CLASSES,
        queue("root", None, -1),
        queue("team-a", "root", -1),
        topology((RACK,)),
        node("x1", 2, {RACK: "r1"}),
        node("x2", 2, {RACK: "r1"}),
        node("y1", 2, {RACK: "r2"}),
    ]
    docs += job_docs(Job("steady", 1, (Pod(node="y1"),), {"minMember": 1}, "build", "team-a"), 0)
    docs += job_docs(Job("spread", 1, (Pod(node="x1"), Pod(node="x2")), required_rack(minMember=2), queue="team-a"), 1)
    docs += job_docs(Job("wide", 2, (Pod(),), {"minMember": 1}, queue="team-a"), 2)
    decisions = decide_docs(docs, ("allocate", "consolidation"))
    wide = decisions.pods["default/wide-0"]
    assert wide.status == "Pipelined" and wide.node in ("x1", "x2")
    spread = [decisions.pods[f"default/spread-{i}"] for i in (0, 1)]
    assert {RACKS.get(p.node or "", "r1") for p in spread} == {"r1"} and all(p.node in ("x1", "x2") for p in spread)
    assert {p.node for p in spread} == {"x1", "x2"} - {wide.node}  # both moved onto the other r1 node
