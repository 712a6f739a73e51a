"""A PodGroup's sub-group tree, as KAI's scheduler walks it (SubGroupSets over PodSets).

Leaves are the job's ``PodSet`` s (pods join them with ``kai.scheduler/subgroup-name``); inner
nodes are ``SubGroupSet`` s, the root standing for the PodGroup itself. A set is satisfied when
``minSubGroup`` of its direct members are (all of them when unset); a leaf when ``minMember``
of its pods are placed. Every level may carry a topology constraint.

What the tree decides, each rule KAI's:

- *which pods to place next* (``collect``): below its minimum a set asks its most needy
  members for exactly what they lack, all or nothing; once satisfied it grows one pod (or one
  member) at a time, so jobs of other queues interleave;
- *which pods to give up first as victims* (``evictable``): one surplus pod deep in the tree,
  else a whole surplus member, else everything;
- *the order of members*: those below their minimum first, then required before optional
  (minimum 0), then the lower allocated-to-minimum ratio; ties keep the spec's order.

kai-ray also keeps the PodGroup's own ``minMember`` when it has sub-groups (``floor``): the root
is satisfied only with that many pods placed. KAI's grouper always writes it equal to what the
sub-groups need, so the two agree on every PodGroup KAI's tools create.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from coordinator.jobs import PodSet
from coordinator.tasks import DEFAULT_SUBGROUP, Task
from kai_ray.model import PodGroup, TopologyConstraint

Counter = Callable[[PodSet], int]


def allocated(ps: PodSet) -> int:
    return ps.active_allocated


def used(ps: PodSet) -> int:
    return ps.active_used


def alive(ps: PodSet) -> int:
    return ps.alive


@dataclass(eq=False, slots=True)
class SubGroupSet:
    name: str
    constraint: TopologyConstraint | None = None
    min_sub_group: int | None = None
    sets: list[SubGroupSet] = field(default_factory=list)
    pod_sets: list[PodSet] = field(default_factory=list)
    floor: int = 0  # root only: the PodGroup's minMember, a floor on its placed pods

    def members(self) -> list[SubGroupSet | PodSet]:
        """KAI lists child sets before child pod sets."""
        return [*self.sets, *self.pod_sets]

    def threshold(self) -> int:
        return self.min_sub_group if self.min_sub_group is not None else len(self.sets) + len(self.pod_sets)

    def leaves(self) -> list[PodSet]:
        out = list(self.pod_sets)
        for child in self.sets:
            out.extend(child.leaves())
        return out

    def count(self, counter: Counter) -> int:
        return sum(counter(ps) for ps in self.leaves())

    def satisfied_members(self, counter: Counter) -> int:
        return sum(1 for m in self.members() if is_met(m, counter))

    def met(self, counter: Counter) -> bool:
        if self.satisfied_members(counter) < self.threshold():
            return False
        return self.floor <= 0 or self.count(counter) >= self.floor

    def ready(self) -> bool:
        """Enough members have enough pods created to be worth trying (KAI's IsReadyForScheduling)."""
        ready = sum(
            1 for m in self.members() if (m.ready() if isinstance(m, SubGroupSet) else m.alive >= m.min_available)
        )
        return ready >= self.threshold() and (self.floor <= 0 or self.count(alive) >= self.floor)


@dataclass(eq=False, slots=True)
class SubGroupTree:
    root: SubGroupSet
    leaf_constraints: dict[str, TopologyConstraint]

    @property
    def flat(self) -> bool:
        """Only a topology constraint on top of plain pod sets: the flat pod-set rules (KAI's for a
        root that holds pod sets only) decide which pods to place and to give up."""
        root = self.root
        return not root.sets and root.min_sub_group is None and root.floor <= 0

    def constraint_of(self, member: SubGroupSet | PodSet) -> TopologyConstraint | None:
        if isinstance(member, SubGroupSet):
            return member.constraint
        return self.leaf_constraints.get(member.name)


def is_met(member: SubGroupSet | PodSet, counter: Counter) -> bool:
    if isinstance(member, SubGroupSet):
        return member.met(counter)
    return counter(member) >= member.min_available


def _progress(member: SubGroupSet | PodSet) -> tuple[int, int]:
    if isinstance(member, SubGroupSet):
        return member.satisfied_members(allocated), member.threshold()
    return member.active_allocated, member.min_available


def order_key(member: SubGroupSet | PodSet) -> tuple[int, int, float]:
    """KAI's subgrouporder plugin as a sort key (smaller goes first; ties keep the member order)."""
    count, threshold = _progress(member)
    if count < threshold:
        return (0, 0, 0.0)
    if threshold == 0:
        return (1, 1, float(count))
    return (1, 0, count / threshold)


def ordered(node: SubGroupSet) -> list[SubGroupSet | PodSet]:
    """Members in KAI's order: sorted stably, so equals keep child sets first, then pod sets, each
    in the spec's order."""
    return sorted(node.members(), key=order_key)


def needs_tree(group: PodGroup) -> bool:
    """Whether the flat pod-set rules fall short: a parent, a minSubGroup, a topology constraint,
    or a PodGroup minMember above what its sub-groups need."""
    subs = group.sub_groups
    if group.topology is not None or group.min_sub_group is not None:
        return True
    if not subs:
        return False
    if any(s.parent or s.min_sub_group is not None or s.topology is not None for s in subs):
        return True
    return group.min_member > sum(s.min_member for s in subs)


def build_tree(group: PodGroup, pod_sets: dict[str, PodSet]) -> SubGroupTree:
    """The tree of ``group`` over its leaves in ``pod_sets`` (a job without sub-groups has one)."""
    root = SubGroupSet("", group.topology, group.min_sub_group)
    leaf_constraints: dict[str, TopologyConstraint] = {}
    if not group.sub_groups:
        for ps in pod_sets.values():
            root.pod_sets.append(ps)
        return SubGroupTree(root, leaf_constraints)
    with_children = {s.parent for s in group.sub_groups if s.parent}
    sets: dict[str, SubGroupSet] = {"": root}
    for sub in group.sub_groups:
        if sub.name in with_children:
            sets[sub.name] = SubGroupSet(sub.name, sub.topology, sub.min_sub_group)
    for sub in group.sub_groups:
        parent = sets[sub.parent or ""]
        if sub.name in sets:
            parent.sets.append(sets[sub.name])
        else:
            ps = pod_sets[sub.name]
            parent.pod_sets.append(ps)
            if sub.topology is not None:
                leaf_constraints[sub.name] = sub.topology
    if group.min_sub_group is None and group.min_member > _requirement(root):
        root.floor = group.min_member
    return SubGroupTree(root, leaf_constraints)


def _requirement(node: SubGroupSet) -> int:
    """The fewest pods that satisfy ``node``: its cheapest ``threshold`` members' own minimums."""
    needs = sorted([*(_requirement(s) for s in node.sets), *(ps.min_available for ps in node.pod_sets)])
    return sum(needs[: node.threshold()])


def clone_tree(tree: SubGroupTree, pod_sets: dict[str, PodSet], min_from_tasks: bool) -> SubGroupTree:
    """The same tree over a stand-in's pod sets (KAI's CloneWithTasks). With ``min_from_tasks`` the
    stand-in asks only for what it holds: empty members go, minimums shrink to what is left."""

    def copy(node: SubGroupSet) -> SubGroupSet | None:
        new = SubGroupSet(node.name, node.constraint, node.min_sub_group)
        for child in node.sets:
            copied = copy(child)
            if copied is not None:
                new.sets.append(copied)
        for ps in node.pod_sets:
            kept = pod_sets.get(ps.name)
            if kept is None or (min_from_tasks and not kept.tasks):
                continue
            new.pod_sets.append(kept)
        if min_from_tasks:
            members = len(new.sets) + len(new.pod_sets)
            if not members and node is not tree.root:
                return None
            if new.min_sub_group is not None:
                new.min_sub_group = min(new.min_sub_group, members)
        elif node is tree.root:
            new.floor = node.floor
        return new

    root = copy(tree.root)
    assert root is not None
    return SubGroupTree(root, tree.leaf_constraints)


# ---------------------------------------------------------------------- which pods to place
def collect(tree: SubGroupTree, real: bool) -> list[Task]:
    """KAI's GetTasksToAllocate over the tree, with the root's floor on top."""
    chosen = _collect_set(tree.root, tree, real)
    root = tree.root
    if root.floor > 0 and not root.met(allocated):
        missing = root.floor - root.count(allocated) - len(chosen)
        if missing > 0:
            taken = {id(t) for t in chosen}
            for ps in (m for m in _leaves_in_order(root, tree)):
                extra = _candidates(ps, missing, real, taken)
                chosen.extend(extra)
                taken.update(id(t) for t in extra)
                missing -= len(extra)
                if missing <= 0:
                    break
    return chosen


def _leaves_in_order(node: SubGroupSet, tree: SubGroupTree) -> Iterable[PodSet]:
    for member in ordered(node):
        if isinstance(member, SubGroupSet):
            yield from _leaves_in_order(member, tree)
        else:
            yield member


def _collect_set(node: SubGroupSet, tree: SubGroupTree, real: bool) -> list[Task]:
    children = ordered(node)
    if not _members_met(node):
        tasks: list[Task] = []
        for child in children[: node.threshold()]:
            tasks.extend(_gang_phase(child, tree, real))
        return tasks
    for child in children:  # elastic: the most needy member that has something to place
        tasks = _collect_set(child, tree, real) if isinstance(child, SubGroupSet) else _from_pod_set(child, real)
        if tasks:
            return tasks
    return []


def _members_met(node: SubGroupSet) -> bool:
    return node.satisfied_members(allocated) >= node.threshold()


def _gang_phase(member: SubGroupSet | PodSet, tree: SubGroupTree, real: bool) -> list[Task]:
    if isinstance(member, SubGroupSet):
        return [] if _members_met(member) else _collect_set(member, tree, real)
    if member.active_allocated >= member.min_available:
        return []
    return _from_pod_set(member, real)


def _from_pod_set(ps: PodSet, real: bool) -> list[Task]:
    placed = ps.active_allocated
    wanted = ps.min_available - placed if placed < ps.min_available else 1
    return _candidates(ps, wanted, real, set())


def _candidates(ps: PodSet, wanted: int, real: bool, taken: set[int]) -> list[Task]:
    if wanted <= 0:
        return []
    pool = [t for t in ps.tasks if t.should_allocate(real) and id(t) not in taken]
    pool.sort(key=Task.order_key)
    return pool[:wanted]


# ---------------------------------------------------------------------- which pods to give up
def evictable(tree: SubGroupTree, keep_minimum: bool = False) -> list[Task]:
    """KAI's GetTasksToEvict over the tree: elastic surplus first, else every placed pod (none
    with ``keep_minimum``: the tree keeps what satisfies it)."""
    root = tree.root
    floor_holds = root.floor > 0 and root.count(allocated) <= root.floor
    tasks = [] if floor_holds else _elastic_eviction(root, tree)
    if tasks or keep_minimum:
        return tasks
    return [t for ps in root.leaves() for t in _placed(ps)]


def _placed(ps: PodSet) -> list[Task]:
    active = [t for t in ps.tasks if t.status.active_allocated]
    active.sort(key=Task.order_key, reverse=True)  # least important first
    return active


def _has_surplus(member: SubGroupSet | PodSet) -> bool:
    if isinstance(member, PodSet):
        return member.active_allocated > member.min_available
    return member.satisfied_members(allocated) > member.threshold() or any(_has_surplus(m) for m in member.members())


def _elastic_eviction(node: SubGroupSet, tree: SubGroupTree) -> list[Task]:
    satisfied = node.satisfied_members(allocated)
    if satisfied == 0:
        return []
    members = sorted(node.members(), key=order_key, reverse=True)  # least prioritized first, equals kept in order
    if _has_surplus(node):
        for member in members:
            if isinstance(member, SubGroupSet):
                tasks = _elastic_eviction(member, tree)
            else:
                tasks = _placed(member)[:1] if member.active_allocated > member.min_available else []
            if tasks:
                return tasks
    if node.threshold() < satisfied:
        for member in members:
            leaves = member.leaves() if isinstance(member, SubGroupSet) else [member]
            tasks = [t for ps in leaves for t in _placed(ps)]
            if tasks:
                return tasks
    return []


# ---------------------------------------------------------------------- building a job's leaves
def leaf_pod_sets(group: PodGroup, tasks: Iterable[Task]) -> tuple[dict[str, PodSet], dict[str, str]]:
    """The leaves of ``group``'s tree with their pods, and the pods that fit none with KAI's reason
    (a pod names a sub-group that does not exist, or one that has children)."""
    if not group.sub_groups:
        minimum = group.min_member if group.min_sub_group is None else 1
        leaf = PodSet(DEFAULT_SUBGROUP, max(minimum, 1), tracked=True)
        for task in tasks:
            leaf.add(task)
        return {DEFAULT_SUBGROUP: leaf}, {}
    inner = {s.parent for s in group.sub_groups if s.parent}
    leaves = {s.name: PodSet(s.name, s.min_member, tracked=True) for s in group.sub_groups if s.name not in inner}
    invalid: dict[str, str] = {}
    for task in tasks:
        found = leaves.get(task.pod.subgroup or DEFAULT_SUBGROUP)
        if found is None:
            invalid[task.key] = (
                f"Pod references subgroup {task.pod.subgroup or DEFAULT_SUBGROUP!r}, which does not exist "
                f"in PodGroup {group.key}" + (" as a leaf" if task.pod.subgroup in inner else "")
            )
            continue
        found.add(task)
    return leaves, invalid
