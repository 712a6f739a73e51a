"""Topology domains of a shard's nodes, read from their labels.

A node belongs to a Topology only when it carries the label of every level (KAI leaves the
others out of every topology-constrained placement). Its domain at level ``i`` is the path
of its label values from the top level down to ``i``: racks with the same name in two zones
are two domains. Each shard reports its own nodes' domains; the coordinator merges the
reports of all shards, since a domain usually spans shards (nodes are spread by hash).

The report is computed once per labels epoch of the shard's table and reused until a node's
labels change, so asking every cycle costs a dictionary lookup.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kai_ray.model import Topology
from placement.node_table import NodeTable

Path = tuple[str, ...]
Codes = npt.NDArray[np.int32]


@dataclass(frozen=True, slots=True)
class DomainReport:
    """One shard's nodes in one Topology. ``codes[n, i]`` indexes ``paths[i]``: the domain of
    ``nodes[n]`` at level ``i``."""

    topology: str
    levels: tuple[str, ...]  # the node labels, top level first
    nodes: tuple[str, ...]
    paths: tuple[tuple[Path, ...], ...]  # per level, the domains these nodes fall in
    codes: Codes  # shape (len(nodes), len(levels))

    @staticmethod
    def empty(topology: Topology) -> DomainReport:
        depth = len(topology.levels)
        return DomainReport(
            topology.name,
            topology.labels,
            (),
            tuple(() for _ in range(depth)),
            np.zeros((0, depth), dtype=np.int32),
        )


def domain_report(table: NodeTable, topology: Topology, rows: npt.NDArray[np.int64] | None = None) -> DomainReport:
    """The domains of ``table``'s present nodes (or of ``rows``) in ``topology``."""
    labels = topology.labels
    picked = np.flatnonzero(table.present) if rows is None else rows
    names: list[str] = []
    values: list[tuple[str, ...]] = []
    for row in picked.tolist():
        node_labels = table.labels[row]
        path = tuple(node_labels.get(label) for label in labels)
        if None in path:
            continue  # outside the topology
        names.append(table.names[row])
        values.append(tuple(str(v) for v in path))
    depth = len(labels)
    if not names:
        return DomainReport.empty(topology)
    codes = np.zeros((len(names), depth), dtype=np.int32)
    level_paths: list[tuple[Path, ...]] = []
    for level in range(depth):
        prefixes = [v[: level + 1] for v in values]
        known: dict[Path, int] = {}
        column = codes[:, level]
        for n, prefix in enumerate(prefixes):
            code = known.get(prefix)
            if code is None:
                code = known[prefix] = len(known)
            column[n] = code
        level_paths.append(tuple(known))
    return DomainReport(topology.name, labels, tuple(names), tuple(level_paths), codes)


class DomainCache:
    """A shard's reports, recomputed only when its nodes' labels (or the node set) change."""

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self._epoch = -1
        self._reports: dict[Topology, DomainReport] = {}

    def report(self, topology: Topology) -> DomainReport:
        if self._epoch != self.table.static_epoch:
            self._reports.clear()
            self._epoch = self.table.static_epoch
        cached = self._reports.get(topology)
        if cached is None:
            cached = self._reports[topology] = domain_report(self.table, topology)
        return cached
