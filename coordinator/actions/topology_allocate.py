"""Placing a job with a sub-group tree or topology constraints (KAI's allocateSubGroupSet).

The walk goes down the tree. At each set (the PodGroup itself at the root) the topology plugin
offers node sets in order (``coordinator.topology_select``); the set's members are placed one
after the other inside the first node set where all of them fit, each member narrowing it again
by its own constraint. A member that fails undoes the whole node set's attempt and the next node
set is tried, so a gang never ends up across two domains of a level it requires. Pods of one
leaf go on the best node of the node set, and within it, with a preferred level, on the best
node of the highest-ranked sub-domain that still has room.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from coordinator.jobs import Job, PodSet
from coordinator.session import SessionState
from coordinator.statement import Statement
from coordinator.subgroups import SubGroupSet, SubGroupTree, ordered
from coordinator.tasks import Task
from coordinator.topology import Mask
from coordinator.topology_select import Demand, NodeSet, demand_of, leaf_anchors, subset_nodes
from kai_ray.model import TopologyConstraint
from placement.domain_index import Rows, best_in


@dataclass(slots=True)
class Failure:
    """Why the last attempt failed: a topology verdict or the pod that found no node."""

    topology: str = ""
    task: Task | None = None
    placed: int = 0
    where: str = ""


class TreeAllocation:
    def __init__(self, state: SessionState, stmt: Statement, job: Job, pipeline_only: bool) -> None:
        self.state, self.stmt, self.job = state, stmt, job
        self.pipeline_only = pipeline_only
        tree = job.tree
        assert tree is not None
        self.tree: SubGroupTree = tree
        self.failure = Failure()
        self.placed = 0

    def run(self, tasks: list[Task], allowed: Mask | None) -> bool:
        mask = self.state.table.present.copy() if allowed is None else allowed & self.state.table.present
        return self._set(self.tree.root, tasks, mask, None)

    # ------------------------------------------------------------------ the walk
    def _set(self, node: SubGroupSet, tasks: list[Task], mask: Mask, bands: list[Mask] | None) -> bool:
        if not tasks:
            return True
        leaves = node.leaves()
        for candidate in self._subsets(node.name, self.tree.constraint_of(node), tasks, mask, bands, leaves):
            checkpoint = self.stmt.checkpoint()
            placed = self.placed
            if self._members(node, tasks, candidate):
                return True
            self.stmt.rollback(checkpoint)
            self.placed = placed
        return False

    def _members(self, node: SubGroupSet, tasks: list[Task], candidate: NodeSet) -> bool:
        for member in ordered(node):
            if isinstance(member, SubGroupSet):
                names = {ps.name for ps in member.leaves()}
                mine = [t for t in tasks if _leaf(t, self.job) in names]
                if not self._set(member, mine, candidate.rows, candidate.bands):
                    return False
            else:
                mine = [t for t in tasks if _leaf(t, self.job) == member.name]
                if not self._leaf(member, mine, candidate):
                    return False
        return True

    def _leaf(self, leaf: PodSet, tasks: list[Task], outer: NodeSet) -> bool:
        if not tasks:
            return True
        constraint = self.tree.leaf_constraints.get(leaf.name)
        for candidate in self._subsets(leaf.name, constraint, tasks, outer.rows, outer.bands, [leaf]):
            checkpoint = self.stmt.checkpoint()
            placed = self.placed
            if all(self._place(task, candidate) for task in tasks):
                return True
            self.stmt.rollback(checkpoint)
            self.placed = placed
        return False

    def _subsets(
        self,
        scope: str,
        constraint: TopologyConstraint | None,
        tasks: list[Task],
        mask: Mask,
        bands: list[Mask] | None,
        leaves: list[PodSet],
    ) -> Iterable[NodeSet]:
        if constraint is None or not constraint.active:
            return [NodeSet(mask, bands, "")]
        demand: Demand = demand_of(self.state, tasks)
        anchors = leaf_anchors(self.state, self.job, leaves)
        subset = subset_nodes(self.state, self.job, scope, constraint, demand, mask, bands, anchors)
        if subset.error:
            self.failure = Failure(topology=subset.error)
        return subset.sets

    # ------------------------------------------------------------------ one pod
    def _place(self, task: Task, candidate: NodeSet) -> bool:
        placer, state = self.state.placer, self.state
        problem = state.claim_problem(task)
        if problem:  # KAI's DRA PreFilter: the pod cannot go anywhere
            self.failure = Failure(topology=f"pod {task.pod.name}: {problem}")
            return False
        shape = state.shape_for(task)
        for rows in candidate.parts():
            quota = state.quota_rows(self.job, task)  # KAI's per-node capacity predicate
            choice = best_in(placer, shape, rows if quota is None else Rows.of(rows.mask & quota), self.pipeline_only)
            if choice is not None:
                claims = state.claims_of(task) if task.pod.resource_claims else None
                self.stmt.place(task, choice, state.accepted_quota(task, choice.node), claims)
                self.placed += 1
                return True
        self.failure = Failure(task=task, placed=self.placed, where=candidate.where)
        return False


def _leaf(task: Task, job: Job) -> str:
    """The leaf a task belongs to (its sub-group label, or the only leaf of a job without any)."""
    if not job.group.sub_groups:
        return next(iter(job.pod_sets))
    return task.subgroup
