"""Topology domains for a session: the shards' reports merged, laid over the session's node rows.

Each shard reports which domain every one of its nodes falls in (``shards/topology_domains.py``);
``merge`` unites the reports (a rack usually spans shards) and numbers the domains of each level
in KAI's order of IDs (the label values joined with "."). A ``TopologyView`` maps that numbering
onto one session table: per row, its domain at every level (-1 outside the topology), so that
what a placement needs per domain (free capacity, how many pods fit) is a ``bincount`` over the
rows the session holds, exact at every moment of the session (rows change as pods are placed,
and a rolled-back attempt leaves no trace).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from kai_ray.model import ClusterSnapshot, PodState, Topology
from shards.node_table import NodeTable
from shards.topology_domains import DomainReport, domain_report

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
        return TopologyView(merged.topology, merged.paths, codes, parents, ids)

    @property
    def depth(self) -> int:
        return len(self.paths)

    def in_topology(self) -> Mask:
        out: Mask = self.codes[:, 0] >= 0 if self.depth else np.zeros(len(self.codes), dtype=bool)
        return out

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

    def sums(self, level: int, rows: Mask, values: Floats) -> Floats:
        """Per domain of ``level``, the sum of ``values`` (rows x columns) over ``rows``."""
        domains = self.row_domains(level)
        pick = rows & (domains >= 0)
        size = self.size(level)
        picked = domains[pick]
        out = np.zeros((size, values.shape[1]))
        for column in range(values.shape[1]):
            out[:, column] = np.bincount(picked, weights=values[pick, column], minlength=size)
        return out

    def counts(self, level: int, rows: Mask, values: Floats) -> Floats:
        """Per domain of ``level``, the sum of a per-row count over ``rows``."""
        domains = self.row_domains(level)
        pick = rows & (domains >= 0)
        out: Floats = np.bincount(domains[pick], weights=values[pick], minlength=self.size(level)).astype(np.float64)
        return out


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


def wanted_topologies(snapshot: ClusterSnapshot, scheduler_name: str) -> list[Topology]:
    """The Topologies that PodGroups with pending pods of this scheduler name (a session that
    places them needs every node's row and the shards' domain reports)."""
    waiting = {
        f"{p.namespace}/{p.pod_group}"
        for p in snapshot.pods
        if p.pod_group and p.scheduler_name == scheduler_name and p.state is PodState.PENDING
    }
    names: set[str] = set()
    for group in snapshot.pod_groups:
        if group.key not in waiting:
            continue
        constraints = [group.topology, *(s.topology for s in group.sub_groups)]
        names.update(c.topology for c in constraints if c is not None and c.active)
    known = {t.name: t for t in snapshot.topologies}
    return [known[n] for n in sorted(names) if n in known]
