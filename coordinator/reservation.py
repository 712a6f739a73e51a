"""Reservations for gangs that have waited too long, and the backfill rule (beyond KAI; off
unless ``reservation`` is configured; docs/reservation-backfill.md).

Nothing here is remembered between sessions: every session works the reservations out again from
what the cluster says (each gang's creation and last eviction, its wait threshold, the expected
runtimes and start times of the jobs on the nodes). A restarted coordinator therefore holds the
same nodes for the same gangs as the one it replaces.

- **Who reserves.** A gang (a job whose minimum is ``reservation.minPods`` pods or more, two by
  default) with nothing placed, ready,
  whose queue would admit it, once it has waited ``after`` (the scheduler's ``reservation.after``,
  or its PodGroup's ``kai-ray.io/reservation-after``; negative: never). The longest-waiting gang
  chooses first; a node is held for one gang at most.
- **Which nodes.** Each node gets a *free time*: when the last job on it is expected to end (its
  last start plus ``kai.scheduler/expected-runtime``; now for an idle node), unknown when any pod
  on it has no expected runtime. The gang takes the nodes that free soonest (unknown last), those
  that hold more of its pods first among equals, then by name, until they hold every pod it must
  place, counted per node as whole copies of its largest pod on the empty node. Under a required
  topology level the nodes come from one domain of that level: the one whose chosen nodes free
  soonest, then the one needing fewest nodes, then by name.
- **Projected start.** The latest free time among the gang's nodes whose free time is known (it
  cannot start before those jobs end). Unknown when none is known.
- **Backfill.** Another job may use a reserved node only if the node's free time is known and the
  job's own expected runtime ends, counted from now, no later than the gang's projected start.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from coordinator.job_timers import go_duration, rfc3339, waiting_since
from coordinator.jobs import Job
from coordinator.session import SessionState
from coordinator.tasks import Status, task_status
from coordinator.topology import Mask
from coordinator.topology_select import demand_of, session_domains
from placement.shapes import PODS

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
NODES_NAMED = 8  # a reason names this many nodes, then says how many more


@dataclass(frozen=True, slots=True)
class Reservation:
    """The nodes one gang holds in this session."""

    job: str
    since: float  # when the gang began to hold them
    rows: Ints  # table rows, in the order they were chosen
    nodes: tuple[str, ...]
    mask: Mask  # the same rows as a mask of the table
    backfillable: Mask  # the rows whose free time is known (backfill may use them)
    projected_start: float | None  # None: no node's free time is known

    def describe(self) -> str:
        start = "unknown" if self.projected_start is None else rfc3339(self.projected_start)
        return (
            f"holds a reservation on {len(self.nodes)} nodes since {rfc3339(self.since)} "
            f"({node_list(self.nodes)}); projected start {start}"
        )


def node_list(nodes: tuple[str, ...]) -> str:
    named = ", ".join(nodes[:NODES_NAMED])
    more = len(nodes) - NODES_NAMED
    return f"{named} and {more} more" if more > 0 else named


def reservation_after(state: SessionState, job: Job) -> float | None:
    """How long ``job`` waits before it reserves (None: it never does, or the option is off)."""
    config = state.config.reservation
    if config is None:
        return None
    own = job.group.reservation_after_seconds
    after = config.after if own is None else own
    return None if after < 0 else after


def is_large_gang(job: Job, min_pods: int) -> bool:
    return sum(ps.min_available for ps in job.pod_sets.values()) >= min_pods


def reserving_since(state: SessionState, job: Job) -> float | None:
    """When a pending gang begins (or began) to hold nodes; None when it never will as it stands."""
    after = reservation_after(state, job)
    config = state.config.reservation
    if after is None or config is None or not is_large_gang(job, config.minPods) or job.active_allocated() > 0:
        return None
    return waiting_since(job) + after


def candidates(state: SessionState) -> list[tuple[float, Job]]:
    """The gangs that hold nodes in this session, longest waiting first. Needs no node's row."""
    if state.config.reservation is None:
        return []
    out = []
    queues = state.queues
    for job in state.pending_jobs():
        since = reserving_since(state, job)
        if since is None or since > state.now or not job.has_pending() or not job.ready_for_scheduling():
            continue
        if not queues.has(job.queue) or not queues.is_leaf(job.queue):
            continue
        if not state.capacity(job, state.job_request(job, real=True)).ok:
            continue  # its queue would not let it in: holding nodes would only leave them idle
        out.append((since, job))
    out.sort(key=lambda pair: (pair[0], pair[1].key))
    return out


def next_reservation(state: SessionState) -> float:
    """The first moment a pending gang begins to hold nodes (inf: none will, as things stand)."""
    if state.config.reservation is None:
        return math.inf
    starts = (reserving_since(state, job) for job in state.pending_jobs() if job.has_pending())
    return min((s for s in starts if s is not None and s > state.now), default=math.inf)


def free_times(state: SessionState) -> tuple[Floats, Mask]:
    """Per table row: when its running jobs are expected to end (now when idle), and whether any
    pod on it has no expected end."""
    table, now = state.table, state.now
    free = np.full(len(table), now)
    unknown = np.zeros(len(table), dtype=bool)
    index = table.index
    for key, pod in state.all_pods.items():
        if pod.node is None:
            continue
        row = index.get(pod.node)
        task = state.tasks.get(key)
        status = task.status if task is not None else task_status(pod)
        if row is None or not status.active_used or status is Status.RELEASING:
            continue  # a releasing pod is on its way out
        job = state.jobs_by_task.get(key) if task is not None else None
        expected = job.group.expected_runtime_seconds if job is not None else None
        started = state.last_start.get(job.key) if job is not None else None
        if not expected or started is None:
            unknown[row] = True
            continue
        free[row] = max(free[row], started + expected)
    return free, unknown


class Planner:
    """Chooses the nodes of each reserving gang on the session's rows (``state.every_node()``
    must have been called)."""

    def __init__(self, state: SessionState) -> None:
        self.state = state
        table = state.table
        self.free, self.unknown = free_times(state)
        self.taken = np.zeros(len(table), dtype=bool)
        self.usable = table.present & table.ready & ~table.unschedulable

    def plan(self, gangs: Iterable[tuple[float, Job]]) -> list[Reservation]:
        out = []
        for since, job in gangs:
            found = self._reserve(since, job)
            if found is not None:
                self.taken |= found.mask
                out.append(found)
        return out

    def _reserve(self, since: float, job: Job) -> Reservation | None:
        state, table = self.state, self.state.table
        tasks = job.tasks_to_allocate(real=True)
        if not tasks:
            return None
        demand = demand_of(state, tasks)
        largest = max(tasks, key=lambda t: (state.requested_quota(t)[0], t.pod.requests.cpu, t.key))
        admitted = state.placer.masks.admitted(largest.shape.constraints)
        per_node = _copies(table.alloc, demand.largest)
        usable = self.usable & admitted & ~self.taken & (per_node > 0)
        best: tuple[tuple[float, int, str], Ints] | None = None
        for scope, rows in self._scopes(job, usable):
            chosen = self._soonest(rows, per_node, demand.count)
            if chosen is None:
                continue
            rank = (self._projected(chosen) or math.inf, len(chosen), scope)
            if best is None or rank < best[0]:
                best = (rank, chosen)
        if best is None:
            return None
        chosen = best[1]
        mask = np.zeros(len(table), dtype=bool)
        mask[chosen] = True
        names = tuple(table.names[int(r)] for r in chosen)
        return Reservation(job.key, since, chosen, names, mask, mask & ~self.unknown, self._projected(chosen))

    def _scopes(self, job: Job, usable: Mask) -> list[tuple[str, Mask]]:
        """The node sets the gang may reserve in: one per domain of its required topology level."""
        constraint = job.group.topology
        state = self.state
        topology = state.topologies.get(constraint.topology) if constraint is not None and constraint.active else None
        level = topology.level_index(constraint.required) if topology and constraint and constraint.required else None
        if topology is None or level is None:
            return [("", usable)]
        view = session_domains(state).view(topology.name, state.table)
        if view is None:
            return []
        domains = view.row_domains(level)
        present = sorted({int(d) for d in domains[usable] if d >= 0})
        return [(view.name(level, d), usable & (domains == d)) for d in present]

    def _soonest(self, rows: Mask, per_node: Ints, needed: int) -> Ints | None:
        """The rows that free soonest (unknown last), the roomiest first among equals, then by
        name, until they hold ``needed`` pods; None when all of them together cannot."""
        candidates = np.flatnonzero(rows)
        if int(per_node[candidates].sum()) < needed:
            return None
        table = self.state.table
        free = np.where(self.unknown[candidates], math.inf, self.free[candidates])
        order = candidates[np.lexsort((table.name_rank[candidates], -per_node[candidates], free))]
        held = np.cumsum(per_node[order])
        count = int(np.searchsorted(held, needed)) + 1
        chosen: Ints = order[:count]
        return chosen

    def _projected(self, rows: Ints) -> float | None:
        known = rows[~self.unknown[rows]]
        return float(self.free[known].max()) if len(known) else None


def _copies(alloc: Floats, pod: Floats) -> Ints:
    """How many copies of ``pod`` fit on each empty node (pod slots included)."""
    asks = pod > 0
    asks[PODS] = True
    ratios = np.floor(alloc[:, asks] / np.maximum(pod[asks], 1e-12) + 1e-9)
    copies: Ints = ratios.min(axis=1).astype(np.int64) if asks.any() else np.zeros(len(alloc), dtype=np.int64)
    return copies


def backfill_verdict(state: SessionState, job: Job, held: Reservation) -> str | None:
    """None when ``job`` may backfill ``held``'s nodes; otherwise why not, in words."""
    runtime = job.group.expected_runtime_seconds
    if not runtime:
        return "it has no expected runtime (kai.scheduler/expected-runtime), so it may not backfill"
    if held.projected_start is None:
        return "the gang's projected start is unknown (the pods on its nodes have no expected runtime)"
    end = state.now + runtime
    if end > held.projected_start:
        return (
            f"its expected runtime ({go_duration(runtime)}) would end at {rfc3339(end)}, "
            f"after the gang's projected start {rfc3339(held.projected_start)}"
        )
    return None
