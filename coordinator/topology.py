"""Topology domains for a session: the shards' reports merged, laid over the session's node rows.

Each shard reports which domain every one of its nodes falls in (``placement/topology_domains.py``);
``merge`` unites the reports (a rack usually spans shards) and numbers the domains of each level
in KAI's order of IDs (the label values joined with "."). A ``TopologyView`` maps that numbering
onto one session table: per row, its domain at every level (-1 outside the topology), so that
what a placement needs per domain (free capacity, how many pods fit) is a ``bincount`` over the
rows the session holds, exact at every moment of the session (rows change as pods are placed,
and a rolled-back attempt leaves no trace).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from kai_ray.model import PodGroup, Topology
from placement.node_table import NodeTable
from placement.topology_domains import DomainReport, domain_report

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]
Path = tuple[str, ...]
ROOT = -1  # the level above the first: the whole topology, one domain


@dataclass(frozen=True, slots=True)
class MergedDomains:
    """One Topology's domains over every shard's nodes."""

    topology: Topology
    paths: tuple[tuple[Path, ...], ...]  # per level, in KAI's ID order
    names: tuple[str, ...]  # nodes in the topology
    codes: npt.NDArray[np.int32]  # (len(names), levels): each node's domain per level


def domain_id(path: Path) -> str:
    """KAI's domain ID: the label values from the top level down, joined with dots."""
    return ".".join(path)


def merge(topology: Topology, reports: Sequence[DomainReport]) -> MergedDomains:
    depth = len(topology.levels)
    paths: list[tuple[Path, ...]] = []
    for level in range(depth):
        union = {p for report in reports for p in report.paths[level]}
        paths.append(tuple(sorted(union, key=domain_id)))
    numbered = [{p: i for i, p in enumerate(level_paths)} for level_paths in paths]
    names: list[str] = []
    parts: list[npt.NDArray[np.int32]] = []
    for report in reports:
        if not report.nodes:
            continue
        names.extend(report.nodes)
        remapped = np.empty_like(report.codes)
        for level in range(depth):
            lookup = np.array([numbered[level][p] for p in report.paths[level]], dtype=np.int32)
            remapped[:, level] = lookup[report.codes[:, level]]
        parts.append(remapped)
    codes = np.concatenate(parts) if parts else np.zeros((0, depth), dtype=np.int32)
    return MergedDomains(topology, tuple(paths), tuple(names), codes)


@dataclass(slots=True)
class TopologyView:
    """A Topology's domains on the rows of one session table."""

    topology: Topology
    paths: tuple[tuple[Path, ...], ...]
    codes: npt.NDArray[np.int32]  # (len(table), levels), -1 outside the topology
    parents: list[Ints]  # per level: each domain's domain one level up (0, the root, above the top)
    ids: list[list[str]]  # per level: KAI's ID of each domain
    inside: Mask  # rows in the topology
    totals: dict[object, DomainTotals] = field(default_factory=dict)  # kept in step, by what they sum

    @staticmethod
    def of(merged: MergedDomains, table: NodeTable) -> TopologyView:
        depth = len(merged.topology.levels)
        codes = np.full((len(table), depth), -1, dtype=np.int32)
        index = table.index
        rows = np.fromiter((index.get(n, -1) for n in merged.names), dtype=np.int64, count=len(merged.names))
        here = rows >= 0
        codes[rows[here]] = merged.codes[here]
        codes[~table.present] = -1
        parents: list[Ints] = []
        for level, level_paths in enumerate(merged.paths):
            if level == 0:
                parents.append(np.zeros(len(level_paths), dtype=np.int64))
                continue
            above = {p: i for i, p in enumerate(merged.paths[level - 1])}
            parents.append(np.array([above[p[:-1]] for p in level_paths], dtype=np.int64))
        ids = [[domain_id(p) for p in level_paths] for level_paths in merged.paths]
        inside = codes[:, 0] >= 0 if depth else np.zeros(len(table), dtype=bool)
        return TopologyView(merged.topology, merged.paths, codes, parents, ids, inside)

    @property
    def depth(self) -> int:
        return len(self.paths)

    def in_topology(self) -> Mask:
        return self.inside

    def total(self, key: object, table: NodeTable, values: RowValues) -> DomainTotals:
        """The running per-domain sums of ``values`` (one per ``key``, made on first use)."""
        found = self.totals.get(key)
        if found is None:
            found = self.totals[key] = DomainTotals(self, table, values)
        return found

    def under(self, level: int, top_level: int, top: int) -> list[int]:
        """The domains of ``level`` inside domain ``top`` of ``top_level`` (every one under the root)."""
        if top_level == ROOT:
            return list(range(self.size(level)))
        ancestor = np.arange(self.size(level))
        for lv in range(level, top_level, -1):
            ancestor = self.parents[lv][ancestor]
        return [int(d) for d in np.flatnonzero(ancestor == top)]

    def roll_up(self, level: int, values: Floats) -> Floats:
        """Per-domain values of ``level`` summed into the level above (the root above the top)."""
        if level == 0:
            out: Floats = values.sum(axis=0, keepdims=True)
            return out
        up = np.zeros((len(self.paths[level - 1]), values.shape[1]))
        np.add.at(up, self.parents[level], values)
        return up

    def size(self, level: int) -> int:
        return 1 if level == ROOT else len(self.paths[level])

    def row_domains(self, level: int) -> npt.NDArray[np.int32]:
        if level == ROOT:
            return np.where(self.codes[:, 0] >= 0, 0, -1).astype(np.int32) if self.depth else self.codes[:, :0]
        return self.codes[:, level]

    def name(self, level: int, domain: int) -> str:
        return "the cluster" if level == ROOT else self.ids[level][domain]

    def label(self, level: int) -> str:
        if level == ROOT:
            return "cluster"
        topo_level = self.topology.levels[level]
        return topo_level.alias or topo_level.node_label.rsplit("/", 1)[-1]  # "rack" for k8s.io/rack

    def parent(self, level: int, domain: int) -> int:
        """The domain one level up (the root's index 0 above the top level)."""
        return int(self.parents[level][domain]) if level > 0 else 0

    def _bins(self, level: int, rows: Mask) -> Ints:
        """Each row's domain of ``level``, or an overflow bin for rows outside ``rows``."""
        domains = self.row_domains(level)
        size = self.size(level)
        bins: Ints = np.where(rows & (domains >= 0), domains, size)
        return bins

    def sums(self, level: int, rows: Mask, values: Floats) -> Floats:
        """Per domain of ``level``, the sum of ``values`` (rows x columns) over ``rows``."""
        bins, size = self._bins(level, rows), self.size(level)
        out = np.empty((size, values.shape[1]))
        for column in range(values.shape[1]):
            out[:, column] = np.bincount(bins, weights=values[:, column], minlength=size + 1)[:size]
        return out


RowValues = Callable[[NodeTable, Ints], Floats]  # per row (of those given), a few values


class DomainTotals:
    """Per-domain sums of a per-row quantity at every level (and the whole topology), kept in step
    with the table: rows changed since the last look (the table logs them) are added again with
    their new values, so a gang's domain choice costs the rows its predecessors touched, not a pass
    over every node."""

    def __init__(self, view: TopologyView, table: NodeTable, values: RowValues) -> None:
        self.view, self.table, self.values_of = view, table, values
        self._rebuild()

    def _rebuild(self) -> None:
        view, table = self.view, self.table
        self.cursor = len(table.track_changes())
        self.values = self.values_of(table, np.arange(len(table)))
        self.values[~view.inside] = 0.0
        inside = view.inside
        deepest = view.depth - 1
        self.levels: dict[int, Floats] = {deepest: view.sums(deepest, inside, self.values)}
        for level in range(deepest, -1, -1):
            self.levels[level - 1] = view.roll_up(level, self.levels[level])

    def level(self, level: int) -> Floats:
        """Per domain of ``level`` (one row for the whole topology), the current sums."""
        self._sync()
        return self.levels[level]

    def _sync(self) -> None:
        log = self.table.track_changes()
        if self.cursor == len(log):
            return
        rows = np.unique(np.asarray(log[self.cursor :], dtype=np.int64))
        self.cursor = len(log)
        rows = rows[self.view.inside[rows]]
        if len(rows) * 8 > len(self.table):
            self._rebuild()
            return
        fresh = self.values_of(self.table, rows)
        delta = fresh - self.values[rows]
        self.values[rows] = fresh
        codes = self.view.codes[rows]
        for level in range(self.view.depth):
            np.add.at(self.levels[level], codes[:, level], delta)
        self.levels[ROOT] += delta.sum(axis=0)


@dataclass(slots=True)
class SessionDomains:
    """Every Topology of a session, merged once, with a view per table the session works on."""

    merged: dict[str, MergedDomains]
    source: NodeTable | None = None  # the table they were read from, when no shard reported them
    _views: dict[tuple[str, int], TopologyView] = field(default_factory=dict)

    @staticmethod
    def from_reports(topologies: Sequence[Topology], reports: Sequence[Sequence[DomainReport]]) -> SessionDomains:
        """``reports[s][t]``: shard ``s``'s report on ``topologies[t]``."""
        merged = {t.name: merge(t, [shard[i] for shard in reports]) for i, t in enumerate(topologies)}
        return SessionDomains(merged)

    @staticmethod
    def from_table(topologies: Sequence[Topology], table: NodeTable) -> SessionDomains:
        """The session table taken as the only shard (sessions opened without a coordinator)."""
        return SessionDomains({t.name: merge(t, [domain_report(table, t)]) for t in topologies}, table)

    def view(self, name: str, table: NodeTable) -> TopologyView | None:
        merged = self.merged.get(name)
        if merged is None:
            return None
        key = (name, id(table))
        view = self._views.get(key)
        if view is None or len(view.codes) != len(table):
            view = self._views[key] = TopologyView.of(merged, table)
        return view


def wanted_topologies(groups: Iterable[PodGroup], known: Mapping[str, Topology]) -> list[Topology]:
    """The Topologies that these PodGroups' constraints name (those of a session's jobs with
    pending pods: a session that places them needs every node's row and the shards' domain reports)."""
    names: set[str] = set()
    for group in groups:
        constraints = [group.topology, *(s.topology for s in group.sub_groups)]
        names.update(c.topology for c in constraints if c is not None and c.active)
    return [known[n] for n in sorted(names) if n in known]
