"""Which pods belong to which PodGroup, and which groups a batch of changes touched.

The cache resolves only the groups marked dirty since its last delta (a changed PodGroup
object, a member that came, went or changed, a PriorityClass), so a changed pod costs the
same at a hundred pods as at a hundred thousand. Resolution itself is ``kai_ray.io.pod_groups``,
which the snapshot loader uses too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kai_ray.grouping import OwnerRef
from kai_ray.io.parse_kai import RawPodGroup
from kai_ray.io.pod_groups import implicit, resolve
from kai_ray.model import Pod, PodGroup, PriorityClass


class GroupIndex:
    def __init__(self) -> None:
        self.members: dict[str, set[str]] = {}  # group key -> pods naming it
        self.implicit_members: dict[str, set[str]] = {}  # group key -> our pods that name none
        self.membership: dict[str, tuple[str, bool]] = {}  # pod -> (group key, implicit)
        self.dirty: set[str] = set()
        self.sent: dict[str, PodGroup] = {}
        self.warnings: dict[str, list[str]] = {}  # group key -> what resolving it warned about

    def place(self, pod: str, group: str | None, is_implicit: bool) -> None:
        """Record (or, with ``group`` None, drop) which group ``pod`` belongs to now."""
        before = self.membership.get(pod)
        now = (group, is_implicit) if group is not None else None
        if before == now:
            self.dirty.add(group or "")  # same group; a member's labels may decide its queue
            return
        if before is not None:
            book = self.implicit_members if before[1] else self.members
            left = book.get(before[0])
            if left is not None:
                left.discard(pod)
                if not left:
                    del book[before[0]]
            self.dirty.add(before[0])
            del self.membership[pod]
        if now is not None and group is not None:
            (self.implicit_members if is_implicit else self.members).setdefault(group, set()).add(pod)
            self.membership[pod] = now
            self.dirty.add(group)

    def touch(self, keys: Iterable[str]) -> None:
        self.dirty.update(keys)

    def touch_all(self, raw_groups: Iterable[str]) -> None:
        self.dirty.update(raw_groups)
        self.dirty.update(self.members)
        self.dirty.update(self.implicit_members)

    def changes(
        self,
        raw_groups: Mapping[str, RawPodGroup],
        pods: Mapping[str, Pod],
        owners: Mapping[str, tuple[OwnerRef, ...]],
        classes: Mapping[str, PriorityClass],
    ) -> tuple[tuple[PodGroup, ...], tuple[str, ...]]:
        """Groups to upsert and to remove, for the dirty keys only."""
        upserted: list[PodGroup] = []
        removed: list[str] = []
        dirty, self.dirty = self.dirty, set()
        for key in sorted(k for k in dirty if k):
            group = self._resolve(key, raw_groups, pods, owners, classes)
            if group is None:
                if self.sent.pop(key, None) is not None:
                    removed.append(key)
                self.warnings.pop(key, None)
            elif self.sent.get(key) != group:
                self.sent[key] = group
                upserted.append(group)
        return tuple(upserted), tuple(removed)

    def _resolve(
        self,
        key: str,
        raw_groups: Mapping[str, RawPodGroup],
        pods: Mapping[str, Pod],
        owners: Mapping[str, tuple[OwnerRef, ...]],
        classes: Mapping[str, PriorityClass],
    ) -> PodGroup | None:
        warnings: list[str] = []
        raw = raw_groups.get(key)
        if raw is not None:  # the object wins over the group its pods would get implicitly
            # Its pods are read only when it names no queue (the first labelled member decides).
            named = [] if raw.queue else [pods[p] for p in self.members.get(key, ()) if p in pods]
            group = resolve(raw, named, classes, warnings)
        elif key in self.implicit_members:
            group = implicit([pods[p] for p in self.implicit_members[key] if p in pods], owners, classes, warnings)
        else:
            return None
        if warnings:
            self.warnings[key] = warnings
        else:
            self.warnings.pop(key, None)
        return group
