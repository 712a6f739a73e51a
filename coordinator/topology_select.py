"""KAI's topology plugin: which sets of nodes a gang (or a sub-group of one) may try, in order.

For a constraint with a *required* level the answer is the domains of that level that can hold
every pod being placed; with a *preferred* level also the domains of every level from the
preferred one up to the required one (or the whole topology), the preferred ones first. Each
level is ordered as KAI sorts its domain tree: within a parent, the domain whose free capacity
the pods would fill most (highest requested-to-free ratio) first, ties by ID, so gangs bin-pack
into domains that are already busy. Inside a chosen set, a preferred level also ranks the nodes:
the preferred sub-domains with the most room get the highest band, so pods crowd into as few of
them as possible. Nodes that lack any level's label are never used under a constraint.

Free capacity is what is free now plus what releasing pods will free (KAI's idle + releasing),
read from the session's rows, so placements earlier in the session are counted. Whether a
domain can hold the pods is counted per node with the largest pod (KAI's "representor") when
the pods are alike, or by summed requests when they are not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from coordinator.jobs import Job, PodSet
from coordinator.session import SessionState
from coordinator.tasks import Task
from coordinator.topology import ROOT, Floats, Ints, Mask, SessionDomains, TopologyView
from kai_ray.model import TopologyConstraint
from placement.domain_index import Rows
from placement.node_table import NodeTable
from placement.shapes import CPU, GPU, PODS

NOT_IN_DOMAIN_RATIO = 1000.0  # KAI's ratio for a resource a domain has none of
SCORE_BANDS = 10  # KAI scores a preferred sub-domain floor((rank + 1) / n * 10)


@dataclass(slots=True)
class NodeSet:
    rows: Mask
    bands: list[Mask] | None  # preferred-level order of the rows, best band first
    where: str  # e.g. "rack r3", for reasons
    _parts: list[Rows] | None = None

    def parts(self) -> list[Rows]:
        """The rows to look at in turn: each band's share of this set, best band first."""
        if self._parts is None:
            masks = [band & self.rows for band in self.bands] if self.bands else [self.rows]
            self._parts = [Rows.of(m) for m in masks]
        return self._parts


@dataclass(slots=True)
class Subset:
    sets: Iterable[NodeSet]
    error: str = ""  # why there is none, in KAI's words plus the numbers that decided it


@dataclass(slots=True)
class Demand:
    """What the pods being placed ask of a domain."""

    total: Floats  # summed requests per column (GPU includes fractions)
    largest: Floats  # column-wise largest pod
    count: int
    representor: bool  # pods are alike: count how many of the largest fit per node


def demand_of(state: SessionState, tasks: list[Task]) -> Demand:
    schema = state.table.schema
    vectors = np.array([schema.vector(t.pod.requests) for t in tasks]).reshape(len(tasks), schema.width)
    for i, task in enumerate(tasks):
        vectors[i, GPU] = state.requested_quota(task)[0]  # whole GPUs plus fractions, as KAI counts them
        vectors[i, PODS] = 1.0
    uses_gpu = vectors[:, GPU] > 0
    extended = vectors[:, PODS + 1 :] > 0
    alike = (uses_gpu.all() or not uses_gpu.any()) and all(col.all() or not col.any() for col in extended.T)
    return Demand(vectors.sum(axis=0), vectors.max(axis=0), len(tasks), bool(alike))


def subset_nodes(
    state: SessionState,
    job: Job,
    scope: str,
    constraint: TopologyConstraint | None,
    demand: Demand,
    mask: Mask,
    bands: list[Mask] | None,
    anchors: list[Task],
) -> Subset:
    """The node sets to try for ``demand`` within ``mask``, best first (KAI's SubsetNodesFn).
    ``anchors``: the pods of this part of the job already placed (a required level keeps new pods
    in their domain). ``bands`` come from an enclosing constraint's preferred level."""
    if constraint is None or not constraint.active:
        return Subset([NodeSet(mask, bands, "")])
    topology = state.topologies.get(constraint.topology)
    if topology is None:
        return Subset([], f"Requested topology {constraint.topology} does not exist")
    required = _level(topology.level_index(constraint.required), constraint.required)
    preferred = _level(topology.level_index(constraint.preferred), constraint.preferred)
    who = "workload" if not scope else f"sub-group {scope}"
    for kind, name, level in (
        ("required", constraint.required, required),
        ("preferred", constraint.preferred, preferred),
    ):
        if name and level is None:
            return Subset(
                [],
                f"topology constraint error: {who} specified '{name}' as the {kind} topology constraint level, "
                f"but the topology tree '{topology.name}' does not contain a level with this name",
            )
    if required is None and preferred is None:
        return Subset([], f"no topology constraints were found for {who}, with topology name {topology.name}")
    if required is not None and preferred is not None and preferred < required:
        return Subset(
            [],
            f"topology constraint error: {who} prefers level '{constraint.preferred}', above its required level "
            f"'{constraint.required}' in topology '{topology.name}'",
        )
    view = session_domains(state).view(topology.name, state.table)
    assert view is not None
    return _Chooser(state, job, scope, view, constraint, demand, required, preferred).choose(mask, bands, anchors)


def _level(index: int | None, name: str) -> int | None:
    return index if name else None


def session_domains(state: SessionState) -> SessionDomains:
    """The session's topology domains: the shards' merged reports, else read off the session's table."""
    domains = state.domains
    if domains is None or (domains.source is not None and domains.source is not state.table):
        domains = state.domains = SessionDomains.from_table(list(state.topologies.values()), state.table)
    return domains


class _Chooser:
    def __init__(
        self,
        state: SessionState,
        job: Job,
        scope: str,
        view: TopologyView,
        constraint: TopologyConstraint,
        demand: Demand,
        required: int | None,
        preferred: int | None,
    ) -> None:
        self.state, self.job, self.scope, self.view = state, job, scope, view
        self.constraint, self.demand = constraint, demand
        self.required, self.preferred = required, preferred
        self.table = state.table

    def choose(self, mask: Mask, bands: list[Mask] | None, anchors: list[Task]) -> Subset:
        view = self.view
        inside = view.in_topology()
        valid = mask & inside
        if not valid.any():
            return Subset(
                [], self._error(f"no node the pods may use carries every level of topology {view.topology.name}")
            )
        deepest = self.preferred if self.preferred is not None else view.depth - 1
        top_level, top = self._common_domain(valid, deepest)
        scope_rows = inside if top_level == ROOT else view.row_domains(top_level) == top
        bottom = self.preferred if self.preferred is not None else self.required
        assert bottom is not None
        levels = list(range(max(top_level, ROOT), bottom + 1)) if bottom >= top_level else [top_level]
        ratio, room = self._aggregate(levels, scope_rows)
        order = self._tree_order(levels, top_level, top, ratio)
        if not self._fits(ratio[top_level][self._index(top_level, top)], room[top_level][self._index(top_level, top)]):
            where = "the cluster" if top_level == ROOT else view.name(top_level, top)
            detail = f"not enough resources in {where} to allocate the job"
            if self.required is not None and self.required > top_level:
                detail += "; " + self._closest(levels, ratio, room, order, None)
            return Subset([], self._error(detail))
        allowed_roots = self._anchored(anchors)
        picks: list[tuple[int, int]] = []
        done: set[int] = set()
        for level in reversed(self._relevant_levels(top_level, bottom)):  # the finest level first (KAI's order)
            effective = max(level, top_level)
            if effective in done:
                continue
            done.add(effective)
            fitting = room[effective] >= self.demand.count if self.demand.representor else ratio[effective] <= 1.0
            for domain in order.get(effective, []):
                if not fitting[self._index(effective, domain)]:
                    continue
                if allowed_roots is not None and not self._inside(effective, domain, allowed_roots):
                    continue
                picks.append((effective, domain))
        if not picks:
            return Subset([], self._error(self._closest(levels, ratio, room, order, allowed_roots)))
        own_bands = self._bands(order, valid) if self.preferred is not None else None
        return Subset(self._node_sets(picks, valid, own_bands if own_bands is not None else bands))

    def _node_sets(self, picks: list[tuple[int, int]], valid: Mask, bands: list[Mask] | None) -> Iterator[NodeSet]:
        """The chosen domains' usable nodes, built only when the walk gets to them."""
        view = self.view
        for level, domain in picks:
            rows = valid if level == ROOT else valid & (view.row_domains(level) == domain)
            if rows.any():
                where = "the cluster" if level == ROOT else f"{view.label(level)} {view.name(level, domain)}"
                yield NodeSet(rows, bands, where)

    def _aggregate(self, levels: list[int], scope_rows: Mask) -> tuple[dict[int, Floats], dict[int, Floats]]:
        """Per level, each domain's ratio (the bin-pack key) and room (how many pods fit). Domains
        nest, so the topology-wide running sums serve any subtree; only the whole-topology figure
        is taken over ``scope_rows`` when the usable nodes are a part of it."""
        view, demand = self.view, self.demand
        columns = tuple(
            int(c) for c in np.union1d(np.flatnonzero((demand.total > 0) | (demand.largest > 0)), [CPU, GPU])
        )
        self.columns = {c: i for i, c in enumerate(columns)}
        picked = list(columns)

        def free(table: NodeTable, rows: Ints) -> Floats:
            out: Floats = table.future[rows][:, picked]
            return out

        free_totals = view.total(("free", columns), self.table, free)
        sums = {level: free_totals.level(level) for level in levels}
        room: dict[int, Floats] = {}
        if demand.representor:
            wanted = [c for c in columns if demand.largest[c] > 0]
            largest = np.array([demand.largest[c] for c in wanted])
            only_slots = wanted == [PODS]

            def fits(table: NodeTable, rows: Ints) -> Floats:
                if only_slots:  # asks for nothing but a pod slot: always fits
                    return np.full((len(rows), 1), float(demand.count))
                share = table.future[rows][:, wanted] / largest
                out: Floats = np.floor(np.clip(share.min(axis=1), 0, None) + 1e-9)[:, None]
                return out

            room_totals = view.total(
                ("room", tuple(wanted), tuple(largest), demand.count if only_slots else 0), self.table, fits
            )
            room = {level: room_totals.level(level)[:, 0] for level in levels}
        else:
            room = {level: np.zeros(len(sums[level])) for level in levels}
        self.sums = sums
        return {level: self._ratios(values) for level, values in sums.items()}, room

    # ------------------------------------------------------------------ domains
    def _common_domain(self, valid: Mask, deepest: int) -> tuple[int, int]:
        """KAI's lowest common domain of the usable nodes, never below the preferred level."""
        level, domain = ROOT, 0
        for lv in range(deepest + 1):
            codes = self.view.row_domains(lv)[valid]
            first = int(codes[0])
            if not (codes == first).all():
                break
            level, domain = lv, first
        return level, domain

    def _relevant_levels(self, top_level: int, bottom: int) -> list[int]:
        """From the required level (or the whole topology) down to the preferred one."""
        upper = self.required if self.required is not None else ROOT
        return list(range(upper, bottom + 1))

    def _index(self, level: int, domain: int) -> int:
        return 0 if level == ROOT else domain

    def _tree_order(
        self, levels: list[int], top_level: int, top: int, ratio: dict[int, Floats]
    ) -> dict[int, list[int]]:
        """Domains per level in KAI's sorted tree: parent's place, then ratio (high first), then ID
        (domains are numbered in ID order)."""
        view = self.view
        order: dict[int, list[int]] = {top_level: [top]}
        for level in levels:
            if level <= top_level:
                continue
            present = np.asarray(view.under(level, top_level, top), dtype=np.int64)
            place = np.zeros(view.size(level - 1) if level > 0 else 1, dtype=np.int64)
            place[np.asarray(order[level - 1], dtype=np.int64)] = np.arange(len(order[level - 1]))
            parent = view.parents[level][present] if level > 0 else np.zeros(len(present), dtype=np.int64)
            ranked = np.lexsort((present, -ratio[level][present], place[parent]))
            order[level] = present[ranked].tolist()
        return order

    def _anchored(self, anchors: list[Task]) -> set[int] | None:
        """Required-level domains that already hold pods of this part of the job (None: any)."""
        if self.required is None or not anchors:
            return None
        index = self.table.index
        codes = self.view.row_domains(self.required)
        return {int(codes[index[t.node]]) for t in anchors if t.node in index and codes[index[t.node]] >= 0}

    def _inside(self, level: int, domain: int, roots: set[int]) -> bool:
        assert self.required is not None
        while level > self.required:
            domain, level = self.view.parent(level, domain), level - 1
        return level == self.required and domain in roots

    def _bands(self, order: dict[int, list[int]], valid: Mask) -> list[Mask]:
        """KAI's preferred-level node scores as row masks, highest score first."""
        assert self.preferred is not None
        ranked = order.get(self.preferred, [])
        codes = self.view.row_domains(self.preferred)
        by_score: dict[int, list[int]] = {}
        n = len(ranked)
        for i, domain in enumerate(ranked):
            by_score.setdefault(math.floor((i + 1) / n * SCORE_BANDS), []).append(domain)
        return [valid & np.isin(codes, by_score[s]) for s in sorted(by_score, reverse=True)]

    # ------------------------------------------------------------------ fit
    def _ratios(self, sums: Floats) -> Floats:
        """Per domain, the largest share of a resource the pods would take (KAI's bin-pack key)."""
        asked = [(c, i) for c, i in self.columns.items() if c != PODS and self.demand.total[c] > 0]
        if not asked:
            return np.zeros(len(sums))
        total = np.array([self.demand.total[c] for c, _ in asked])
        have = sums[:, [i for _, i in asked]]
        with np.errstate(divide="ignore", invalid="ignore"):
            shares = np.where(have > 0, total / np.where(have > 0, have, 1.0), NOT_IN_DOMAIN_RATIO)
        out: Floats = shares.max(axis=1)
        return out

    def _fits(self, ratio: float, room: float) -> bool:
        if self.demand.representor:
            return room >= self.demand.count
        return ratio <= 1.0

    # ------------------------------------------------------------------ reasons
    def _error(self, detail: str) -> str:
        constraint = self.constraint
        whom = f"job <{self.job.key}>" + (f", subgroup {self.scope}" if self.scope else "")
        requirement = constraint.required or "(none)"
        return f"topology {constraint.topology}, requirement {requirement} couldn't be satisfied for {whom}: {detail}"

    def _closest(
        self,
        levels: list[int],
        ratio: dict[int, Floats],
        room: dict[int, Floats],
        order: dict[int, list[int]],
        anchored: set[int] | None,
    ) -> str:
        """What no domain of the required level has, and the domain that came closest."""
        view, demand = self.view, self.demand
        level = self.required if self.required is not None else levels[-1]
        level = max(level, levels[0])
        domains = order.get(level, [])
        if anchored is not None and self.required is not None:
            domains = [d for d in domains if self._inside(level, d, anchored)]
        label = view.label(level)
        column, unit = (GPU, "GPUs") if demand.total[GPU] > 0 else (CPU, "CPU millicores")
        if not domains:
            return f"no {label} holds the pods already running"

        def rank(d: int) -> tuple[float, float]:
            i = self._index(level, d)
            return (room[level][i] if demand.representor else 0.0, -ratio[level][i])

        best = max(domains, key=rank)
        have = self.sums[level][self._index(level, best)][self.columns[column]]
        detail = (
            f"no {label} has {_amount(demand.total[column])} {unit} free for the {demand.count} pods; "
            f"best {label} {view.name(level, best)} has {_amount(max(have, 0.0))}"
        )
        if demand.representor:
            detail += f" (room for {int(room[level][self._index(level, best)])} of the pods)"
        return detail


def _amount(value: float) -> str:
    return f"{value:.3g}"


def leaf_anchors(state: SessionState, job: Job, leaves: list[PodSet]) -> list[Task]:
    """Placed pods of these leaves in the session's own job (stand-ins in victim searches hold
    only the pods being placed)."""
    real = state.jobs.get(job.key, job)
    names = {ps.name for ps in leaves}
    return [
        t
        for name, ps in real.pod_sets.items()
        if name in names
        for t in ps.tasks
        if t.status.active_allocated and t.node is not None
    ]
