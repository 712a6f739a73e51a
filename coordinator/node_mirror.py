"""The coordinator's copy of every node row, for the actions that look at the whole cluster.

Victim searches (consolidation, reclaim, preempt) and stale-gang eviction need every node, not
just the shards' best candidates. Instead of having every shard send every row each cycle, the
mirror asks each shard only for the rows that changed since it last looked (and the nodes the
shard lost); a cycle with nothing new costs one small round and a copy of the arrays.
"""

from __future__ import annotations

from collections.abc import Mapping

from coordinator.shard_client import Answers
from coordinator.shard_set import ShardSet
from placement.node_table import NodeTable
from placement.rows import load_rows
from placement.shapes import ResourceSchema
from shards.messages import RowChanges
from shards.protocol import ShardRequest


class NodeMirror:
    def __init__(self) -> None:
        self.table = NodeTable(ResourceSchema())
        self.home: dict[str, int] = {}  # node -> the shard that last reported it
        self.since: dict[int, tuple[int, int]] = {}  # shard -> (incarnation, stamp) seen
        self.rows_received = 0  # for tests and benchmarks: rows that crossed over

    def sync(self, shards: ShardSet, before: Mapping[int, ShardRequest] | None = None) -> Answers[object]:
        """Bring the mirror up to date, in one round in which each shard first serves
        ``before[sid]`` (if given); the answers to those. A shard that did not answer keeps its
        old rows here, and the caller decides what a missing shard means."""
        ids = shards.ids
        for gone in set(self.since) - set(ids):
            del self.since[gone]
        answers = shards.changes_after(before or {}, {sid: self.since.get(sid, (0, 0)) for sid in ids})
        for sid in sorted(answers.replies):
            self._apply(sid, answers.replies[sid][1])
        return Answers({sid: first for sid, (first, _) in answers.replies.items()}, answers.down)

    def _apply(self, sid: int, change: RowChanges) -> None:
        table = self.table
        listed = set(change.rows.names)
        dropped = [n for n, home in self.home.items() if home == sid and n not in listed] if change.full else []
        for name in [*dropped, *change.removed]:
            if self.home.get(name) == sid:  # not if it has since moved to another shard
                del self.home[name]
                if name in table.index:
                    table.remove_node(name)
        if len(change.rows):
            names = set(change.rows.schema.scalars) | set(table.schema.scalars)
            if len(names) > len(table.schema.scalars):
                table.widen(ResourceSchema(tuple(sorted(names))))
            load_rows(table, change.rows)
            for name in change.rows.names:
                self.home[name] = sid
            self.rows_received += len(change.rows)
        self.since[sid] = (change.incarnation, change.stamp)

    def session_table(self) -> NodeTable:
        """A copy a session may change."""
        return self.table.copy()
