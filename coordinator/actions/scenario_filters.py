"""The solver's scenario filters: cheap checks that reject a victim scenario before it is
simulated (KAI's accumulated scenario filters, run by its pod scenario builder).

Each filter is made once per search step from the scenario it starts with, then asked about
every scenario the step grows from it, in ``SCENARIO_FILTERS`` order; the first refusal skips
the scenario without spending the search budget. A filter accumulates what the victims add as
they come (each victim is counted once), so asking it is cheap however many victims there are.
KAI's solver builds these itself rather than taking them from plugins, and so does this one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from coordinator.actions.gpu_headroom import gpu_headroom_all, required_gpus
from coordinator.actions.scenario import Scenario, VictimCursor
from coordinator.actions.topology_filter import TopologyGpuFilter
from coordinator.session import SessionState
from placement.constraints import Mask, tolerates_all


class ScenarioFilter(Protocol):
    def could_ever_pass(self, ceiling: np.ndarray) -> bool:
        """False when no scenario of the step can pass, whatever its victims (``ceiling`` bounds
        what each node could offer: ``gpu_headroom.gpu_ceiling``); the step is then skipped."""
        ...

    def passes(self, scenario: Scenario) -> bool: ...


# Made per search step from the session, the step's first scenario and the nodes it may use
# (a mask over the session table's rows); None when the filter has nothing to check for this
# preemptor.
ScenarioFilterFactory = Callable[[SessionState, Scenario, Mask], ScenarioFilter | None]


def largest_first(values: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` largest values, largest first, ties by position: what a stable
    sort of the negated values would start with, without sorting every node for a few."""
    if k >= len(values):
        return np.argsort(-values, kind="stable")
    threshold = np.partition(values, len(values) - k)[len(values) - k]  # the k-th largest
    above = np.flatnonzero(values > threshold)
    level = np.flatnonzero(values == threshold)[: k - len(above)]
    chosen = np.concatenate([above, level])
    return chosen[np.argsort(-values[chosen], kind="stable")]


class IdleGpuFilter:
    """KAI's accumulated idle-GPU filter: could the pending pods' whole GPUs fit on the
    nodes with the most free-or-freeing GPUs, counting what the victims give back?

    Only the ``k`` best nodes matter (k = pods pending). KAI keeps them in a sorted list that
    each victim's GPUs update; here the victims' GPUs are added up per node as they come and the
    ``k`` best are taken when asked. A node's value only grows, so the ``k`` best are the ``k``
    largest of the nodes that started best and the nodes victims gave GPUs to; which of two
    equal nodes is kept changes no answer. A gang's search asks this once or twice per pod it
    grows by, with every victim so far counted: keeping the list sorted on every victim made
    that cubic in the gang's size.
    """

    def __init__(self, state: SessionState, scenario: Scenario) -> None:
        table = state.table
        headroom = gpu_headroom_all(state.table)
        self.capacity: dict[str, float] = {}  # nodes victims gave GPUs to: their GPUs, counted so far
        self.required = sorted((required_gpus(t) for t in scenario.pending), reverse=True)
        k = max(len(self.required), 1)
        present = np.flatnonzero(table.present)
        best = present[largest_first(headroom[present], k)]
        self.best_at_start: dict[str, float] = {table.names[r]: float(headroom[r]) for r in best}
        self.headroom = headroom
        self.table = table
        self.seen: set[str] = set()
        self.cursor = VictimCursor()

    def _credit(self, node: str, gpus: float) -> None:
        row = self.table.index.get(node)
        if row is None:
            return
        self.capacity[node] = self.capacity.get(node, float(self.headroom[row])) + gpus

    def _best(self) -> list[float]:
        """The ``k`` largest GPU counts a node offers now, largest first."""
        capacity = self.capacity
        values = [capacity.get(name, value) for name, value in self.best_at_start.items()]
        values += [value for name, value in capacity.items() if name not in self.best_at_start]
        values.sort(reverse=True)
        return values[: max(len(self.required), 1)]

    def could_ever_pass(self, ceiling: np.ndarray) -> bool:
        """False when no scenario can pass, whatever its victims: ``ceiling`` bounds what each
        node could offer (``gpu_ceiling``), and two conditions every passing scenario meets fail
        even there (the largest pod fits on one node; the pods fit in the best nodes together).
        Both only grow with capacity, so failing at the ceiling is failing everywhere; the
        search is then skipped rather than run through every running job of the cluster."""
        needs = [need for need in self.required if need > 0]
        if not needs:
            return True
        best = np.sort(ceiling)[::-1][: len(needs)]
        if not len(best):
            return False  # a cluster without nodes: no victim frees anything anywhere
        return bool(needs[0] <= best[0] and sum(needs) <= float(best.sum()))

    def passes(self, scenario: Scenario) -> bool:
        for task in scenario.victims_after(self.cursor):
            if task.key in self.seen or not task.node:
                continue
            self.seen.add(task.key)
            if task.accepted[0]:
                self._credit(task.node, task.accepted[0])
        if not self.required or self.required[0] == 0:
            return True
        return _first_fit(self.required, self._best())


def _first_fit(required: list[float], best: list[float]) -> bool:
    """Whether the pods' GPUs (``required``, largest first) fit the nodes' (``best``, largest
    first), each pod on the first node with room for it. A pod's scan starts where the last pod
    of its size went: the nodes before that had no room for it, and room only shrinks."""
    used = [0.0] * len(best)
    start: dict[float, int] = {}
    for need in required:
        if need == 0:
            return True
        i = start.get(need, 0)
        while i < len(best):
            if best[i] < need:
                return False  # sorted: no node further on has room for this pod
            if best[i] - used[i] >= need:
                used[i] += need
                break
            i += 1
        else:
            return False
        start[need] = i
    return True


class NodeAffinityFilter:
    """Pending pods with a node selector or affinity need a matching node among the
    feasible nodes and the victims' nodes."""

    def __init__(self, state: SessionState, scenario: Scenario, feasible: Mask) -> None:
        self.state = state
        self.rows = feasible & state.table.present
        self.constrained = [
            t for t in scenario.pending if t.shape.constraints.node_selector or t.shape.constraints.affinity
        ]
        self.cursor = VictimCursor()
        # The rows only grow, so a scenario that passed makes every later one pass, and one
        # that failed makes the next fail until a victim adds a row.
        self.verdict: bool | None = None

    def active(self) -> bool:
        return bool(self.constrained)

    def could_ever_pass(self, ceiling: np.ndarray) -> bool:
        return True

    def passes(self, scenario: Scenario) -> bool:
        table = self.state.table
        added = False
        for task in scenario.victims_after(self.cursor):
            row = table.index.get(task.node) if task.node else None
            if row is not None and table.present[row] and not self.rows[row]:
                self.rows[row] = added = True
        if self.verdict is True or (self.verdict is False and not added):
            return self.verdict
        self.verdict = self._matches()
        return self.verdict

    def _matches(self) -> bool:
        table = self.state.table
        rows = np.flatnonzero(self.rows).tolist()
        names, labels = table.names, table.labels
        for task in self.constrained:
            constraints = task.shape.constraints
            if not tolerates_all((), constraints.tolerations) or not any(
                constraints.matches_labels(labels[row], names[row]) for row in rows
            ):
                return False
        return True


def _node_affinity(state: SessionState, scenario: Scenario, nodes: Mask) -> ScenarioFilter | None:
    made = NodeAffinityFilter(state, scenario, nodes)
    return made if made.active() else None


def _topology(state: SessionState, scenario: Scenario, nodes: Mask) -> ScenarioFilter | None:
    made = TopologyGpuFilter(state, scenario.preemptor, scenario.pending)
    return made if made.active() else None


SCENARIO_FILTERS: dict[str, ScenarioFilterFactory] = {
    "idle-gpus": lambda state, scenario, _nodes: IdleGpuFilter(state, scenario),
    "node-affinity": _node_affinity,
    "topology": _topology,
}
