"""Which pods belong to which PodGroup, and which groups a batch of changes touched.

The cache resolves only the groups marked dirty since its last delta (a changed PodGroup
object, a member that came, went or changed, a PriorityClass), so a changed pod costs the
same at a hundred pods as at a hundred thousand. Resolution itself is ``pod_grouper.pod_groups``,
which the snapshot loader uses too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from kai_ray.model import Pod, PodGroup, PriorityClass
from pod_grouper.grouping import ImplicitGroup
from pod_grouper.pod_groups import RawPodGroup, implicit_pod_group, resolve_pod_group


class GroupIndex:
    def __init__(self) -> None:
        self.members: dict[str, set[str]] = {}  # group key -> pods naming it
        self.implicit_members: dict[str, set[str]] = {}  # group key -> our pods that name none
        self.membership: dict[str, tuple[str, bool]] = {}  # pod -> (group key, implicit)
        self.dirty: set[str] = set()
        # Every group as last handed to the coordinator. Replaced, never changed in place: the
        # status writer reads it on the event loop while the next batch is worked out.
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
        spec_of: Callable[[Pod], ImplicitGroup],
        classes: Mapping[str, PriorityClass],
    ) -> tuple[tuple[PodGroup, ...], tuple[str, ...]]:
        """Groups to upsert and to remove, for the dirty keys only. ``spec_of`` gives a pod's
        implicit group (``pod_grouper.grouping.implicit_group`` with its owners)."""
        upserted: list[PodGroup] = []
        removed: list[str] = []
        dirty, self.dirty = self.dirty, set()
        sent = self.sent
        for key in sorted(k for k in dirty if k):
            group = self._resolve(key, raw_groups, pods, spec_of, classes)
            if group is None:
                if key in sent:
                    removed.append(key)
                self.warnings.pop(key, None)
            elif sent.get(key) != group:
                upserted.append(group)
        if upserted or removed:
            sent = dict(sent)
            for key in removed:
                del sent[key]
            sent.update((g.key, g) for g in upserted)
            self.sent = sent
        return tuple(upserted), tuple(removed)

    def _resolve(
        self,
        key: str,
        raw_groups: Mapping[str, RawPodGroup],
        pods: Mapping[str, Pod],
        spec_of: Callable[[Pod], ImplicitGroup],
        classes: Mapping[str, PriorityClass],
    ) -> PodGroup | None:
        warnings: list[str] = []
        # A PodGroup naming a PriorityClass the cluster lacks (the pod grouper's "train" where KAI's
        # classes are not installed) gets the default priority, as in KAI: no event on every group.
        missing: list[str] = []
        raw = raw_groups.get(key)
        if raw is not None:  # the object wins over the group its pods would get implicitly
            # Its pods are read only when it names no queue (the first labelled member decides).
            named = [] if raw.queue else [pods[p] for p in self.members.get(key, ()) if p in pods]
            group = resolve_pod_group(raw, named, classes, warnings, missing)
        elif key in self.implicit_members:
            found = [pods[p] for p in self.implicit_members[key] if p in pods]
            group = implicit_pod_group(found, spec_of, classes, warnings, missing)
        else:
            return None
        if warnings:
            self.warnings[key] = warnings
        else:
            self.warnings.pop(key, None)
        return group
