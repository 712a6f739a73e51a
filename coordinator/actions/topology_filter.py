"""KAI's topology-aware idle-GPU filter for victim searches.

Before a scenario is simulated: for each required level of the preemptor (the job's own and its
sub-groups'), could every part that requires it get its GPUs inside one domain of that level,
counting what is free or freeing there plus what the scenario's victims give back? Parts are
matched largest first to the domains with the most room, each domain's room shrinking as it is
used. A scenario that fails cannot place the preemptor without crossing the level, so it is
skipped without being simulated.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from coordinator.actions.gpu_headroom import gpu_headroom_all
from coordinator.actions.scenario import Scenario, VictimCursor
from coordinator.jobs import Job
from coordinator.session import SessionState
from coordinator.subgroups import SubGroupSet, SubGroupTree
from coordinator.tasks import Task
from coordinator.topology_select import session_domains
from kai_ray.model import TopologyConstraint

Key = tuple[str, int]  # (topology, level index)


class TopologyGpuFilter:
    def __init__(self, state: SessionState, preemptor: Job, pending: list[Task]) -> None:
        self.state = state
        self.needs: dict[Key, list[float]] = defaultdict(list)
        self.capacity: dict[Key, dict[int, float]] = {}
        self.row_domain: dict[Key, np.ndarray] = {}
        self.seen: set[str] = set()
        self.cursor = VictimCursor()
        tree = preemptor.tree
        if tree is None:
            return
        wanted = {id(t): state.requested_quota(t)[0] for t in pending}
        self._collect(tree, tree.root, wanted)
        headroom = gpu_headroom_all(state.table) if self.needs else None
        domains = session_domains(state)
        for key in self.needs:
            view = domains.view(key[0], state.table)
            assert view is not None and headroom is not None
            codes = view.row_domains(key[1])
            self.row_domain[key] = codes
            inside = (codes >= 0) & state.table.present
            sums = np.bincount(codes[inside], weights=headroom[inside], minlength=view.size(key[1]))
            self.capacity[key] = {d: float(v) for d, v in enumerate(sums)}

    def active(self) -> bool:
        return bool(self.needs)

    def _collect(self, tree: SubGroupTree, node: SubGroupSet, wanted: dict[int, float]) -> None:
        self._need(tree.constraint_of(node), [t for ps in node.leaves() for t in ps.tasks], wanted)
        for child in node.sets:
            self._collect(tree, child, wanted)
        for leaf in node.pod_sets:
            self._need(tree.constraint_of(leaf), leaf.tasks, wanted)

    def _need(self, constraint: TopologyConstraint | None, tasks: list[Task], wanted: dict[int, float]) -> None:
        if constraint is None or not constraint.active or not constraint.required:
            return
        topology = self.state.topologies.get(constraint.topology)
        level = topology.level_index(constraint.required) if topology else None
        gpus = sum(wanted.get(id(t), 0.0) for t in tasks)
        if level is not None and gpus > 0:
            self.needs[(constraint.topology, level)].append(gpus)

    def could_ever_pass(self, ceiling: np.ndarray) -> bool:
        return True

    def passes(self, scenario: Scenario) -> bool:
        index = self.state.table.index
        for task in scenario.victims_after(self.cursor):
            if task.key in self.seen or not task.node or task.node not in index:
                continue
            self.seen.add(task.key)
            row = index[task.node]
            for key, codes in self.row_domain.items():
                domain = int(codes[row])
                if domain >= 0:
                    self.capacity[key][domain] = self.capacity[key].get(domain, 0.0) + task.accepted[0]
        for key, needs in self.needs.items():
            room = sorted(self.capacity[key].values(), reverse=True)
            for need in sorted(needs, reverse=True):
                best = max(range(len(room)), key=lambda i: room[i], default=None)
                if best is None or room[best] + 1e-9 < need:
                    return False
                room[best] -= need
        return True
