"""Session state that lives across cycles: tasks, jobs and queue sums, changed by what changed.

A session opened from scratch turns every pod into a task and every pod group into a job, and
sums every queue's requests and allocations, each cycle. The coordinator's cluster model hands
out the same pod and pod-group records until they change, so this cache keeps the tasks and
jobs made from them: a pod whose record is the same object keeps its task (reset to what the
record says, since the last session may have moved it), a job whose group and members are the
same keeps its job, and a job's contribution to its queue's sums is kept with it. Only new or
changed records cost a task, a job or a sum. The tasks, and which pods each group has, are
kept in ``kept_tasks.py``; this module keeps the jobs and the queues' sums. The fair share is
divided again each cycle (a division over the queue tree is cheap); the cluster totals it
divides are summed in the same single pass over the pods that finds what changed.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from coordinator.cluster_model import ChangeLog, ClusterModel
from coordinator.fairshare import QueueTree, divide, usage_array
from coordinator.gated_demand import add_gated_demand, gated_demand
from coordinator.gpu_request import requested_gpus
from coordinator.job_timers import apply_timers
from coordinator.jobs import Job, PodSet, missing_group_note
from coordinator.kept_tasks import KeptTasks
from coordinator.min_runtime import MinRuntimes
from coordinator.node_facts import NodeFacts
from coordinator.queue_state import QueueState
from coordinator.queue_totals import QueueTotals
from coordinator.session import SessionState
from coordinator.session_open import attach_placed_pods, make_placer
from coordinator.session_queues import add_queue_sums, queue_spec
from coordinator.subgroups import build_tree, leaf_pod_sets, needs_tree
from coordinator.tasks import DEFAULT_SUBGROUP, Task
from kai_ray.config import SchedulerConfig
from kai_ray.model import PodGroup
from placement.node_table import NodeTable
from placement.placer import Placer

Sums = tuple[float, float, float, float, float, float, float, float, float]  # request, allocated, allocated np


class SessionCache:
    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        self.nodes = NodeFacts()
        self.kept = KeptTasks(config.schedulerName, self.nodes)  # our pods' tasks
        self.groups: dict[str, PodGroup] = {}  # the group record each job was made from
        self.jobs: dict[str, Job] = {}
        self.positions: dict[str, int] = {}  # job -> its place in ``jobs`` (the session's order)
        self._next_position = 0
        self.opens = 0  # sessions opened so far: what changed is known relative to the last one only
        self.jobs_by_task: dict[str, Job] = {}
        self.invalid: dict[str, dict[str, str]] = {}  # tree job -> its pods that name no leaf, and why
        self.totals = QueueTotals()  # each job's contribution to its queue's sums
        self.unsummed: set[str] = set()  # jobs whose contribution is still to be worked out
        # Jobs stale as their records stand, or whose group carries a stale-since time: with the
        # jobs a session changes, all that stale-gang eviction must look at.
        self.stale_watch: set[str] = set()
        self.last_start: dict[str, float] = {}  # job -> its group's last start time, where it has one
        self.not_ready: set[str] = set()  # gangs with fewer pods than their minimum, as their records stand
        self.job_changes = 0  # counts jobs made and gone (the tasks count their own)
        self.queues_version = -1
        self.tree = QueueTree.build([])
        self.model_seen: ClusterModel | None = None  # the model whose change log this cache reads
        # The jobs the last session may have changed (its close says; None: unknown, reset all).
        self.to_reset: set[str] | None = None
        self.remade: set[str] = set()  # jobs made again or gone in this open
        self.orphans: set[str] = set()  # pod groups that pods name and that do not exist

    @property
    def membership(self) -> int:
        """Grows with every change to which pods and jobs there are and who belongs where."""
        return self.kept.changes + self.job_changes

    def open(self, model: ClusterModel, now: float, table: NodeTable, placer_type: type[Placer]) -> SessionState:
        config = self.config
        self.opens += 1
        changes = model.take_changes()
        nodes_changed = self.nodes.refresh(model)
        if self.model_seen is not model or nodes_changed or self.to_reset is None:
            changes = None  # read every record
        self.model_seen = model
        to_reset, self.to_reset = self.to_reset, None  # until this session's close says otherwise
        self.remade = set()
        queues_changed = self.queues_version != model.queues_version
        dirty, changed_pods = self._tasks(model, changes, to_reset)
        self._jobs(model, dirty, changes, to_reset)
        self._find_orphans(dirty if changes is not None else None)
        if changed_pods is not None:
            for key in self.remade:  # their pods' jobs (and notes) changed with them
                changed_pods.update(self.kept.members.get(key, ()))
        state = SessionState(
            config=config,
            now=now,
            table=table,
            placer=make_placer(placer_type, table, config),
            queues=self.queues(model, self.kept.capacity()),
            jobs=self.jobs,
            tasks=self.kept.tasks,
            jobs_by_task=self.jobs_by_task,
            all_pods=dict(model.pods),  # as of the session's start
            pending_at_open=tuple(self.kept.pending.values()),
            stale_watch=frozenset(self.stale_watch),
            membership=self.membership,
            not_ready_at_open=frozenset(self.not_ready),
            changed_pods=None if changed_pods is None or queues_changed else frozenset(changed_pods),
            placed_holds=self.kept.placed_holds,
            remade_jobs=frozenset(self.remade),
            reset_jobs=None if to_reset is None or changes is None else frozenset(to_reset),
            opened=(id(self), self.opens),
            positions=self.positions,
            largest_node_gpus=self.nodes.largest_gpus,
            gpu_memory_kinds=self.nodes.gpu_memory_kinds,
            placer_type=placer_type,
            unusable_queues=model.unusable_queues,
            topologies=dict(model.topologies),
        )
        for notes in self.invalid.values():
            state.pod_notes.update(notes)
        state.last_start = dict(self.last_start)  # a session adds the jobs it starts
        state.min_runtimes = MinRuntimes.of(
            model.queues.values(),
            config.defaultPreemptMinRuntime,
            config.defaultReclaimMinRuntime,
            config.reclaimResolveMethod,
        )
        if config.jobAging is not None:  # boosts are recomputed from scratch, as for a fresh session
            for job in self.jobs.values():
                job.boost = 0
        apply_timers(self.jobs, state.last_start, config, now)
        for key in self.orphans:
            for pod in self.kept.members[key]:
                state.pod_notes[pod] = missing_group_note(key, state.all_pods.get(pod))
        if len(table):  # a table that already carries the cluster's usage: tasks learn their holds on it
            attach_placed_pods(state, state.all_pods.values(), apply=False)
        return state

    def close(self, state: SessionState, touched: set[str]) -> None:
        """The session is over: the next open resets only the jobs (and their tasks) it may have
        changed. A session opened on a table that holds every placed pod changed every task; so
        does one with aging or a runtime policy, which set every job's boost or mark. A session
        moved onto every node's row later (a victim search) left its untouched tasks as they
        were but for their holdings on that table, which are forgotten here in one step (the
        tasks share ``placed_holds``), where resetting every task would read every pod record
        again."""
        if state.rebased:
            self.kept.placed_holds.move_to(None)
        opened_on_rows = len(state.table) and not state.rebased
        if opened_on_rows or self.config.jobAging is not None or self.config.expectedRuntimeExceeded != "ignore":
            self.to_reset = None
            return
        self.to_reset = state.maybe_changed_keys(touched)

    # ------------------------------------------------------------------ tasks
    def _tasks(
        self, model: ClusterModel, changes: ChangeLog | None, to_reset: set[str] | None
    ) -> tuple[set[str], set[str] | None]:
        """Tasks for our pods, kept where the record is the same, and reset to what their records
        say; other schedulers' use of ready nodes. Returns the pod groups whose members changed,
        and the pods whose records changed (None: every record was read)."""
        kept = self.kept
        if changes is None:
            dirty, changed = kept.read_all(model.pods), None
        else:
            for job_key in to_reset or ():  # what the last session moved goes back to its record
                job = self.jobs.get(job_key)
                if job is not None:
                    kept.reset(job.tasks)
            dirty, changed = kept.read_changed(model.pods, changes.pods), set(changes.pods)
        for key in kept.forgotten:  # a pod's new task joins its job when the job is made again
            self.jobs_by_task.pop(key, None)
        kept.forgotten.clear()
        return dirty, changed

    # ------------------------------------------------------------------ jobs
    def _jobs(self, model: ClusterModel, dirty: set[str], changes: ChangeLog | None, to_reset: set[str] | None) -> None:
        """Jobs made again where their group or members changed, dropped where the group is
        gone; the others start from their records again (the last session's fit errors and
        staleness clock go, cached answers about their tasks are stale)."""
        groups = model.pod_groups
        if changes is None:
            candidates: Iterable[str] = [k for k in self.jobs if k not in groups] + list(groups)
            to_reset = None
        else:
            candidates = changes.groups | dirty
        for key in candidates:
            group = groups.get(key)
            if group is None:
                self._drop_job(key)
            elif self.groups.get(key) is not group or key in dirty or key not in self.jobs:
                self._build(group)
        for key in self.jobs if to_reset is None else to_reset:
            job = self.jobs.get(key)
            if job is None or key in self.remade:
                continue
            job.version += 1  # statuses were reset: cached answers are stale
            if job.fit_errors:
                job.fit_errors = {}
            job.stale_since = job.group.stale_since

    def _find_orphans(self, dirty: set[str] | None) -> None:
        """Pod groups that pods name but that do not exist, among those whose members or job
        changed (None: all of them)."""
        if dirty is None:
            self.orphans = {key for key in self.kept.members if key not in self.jobs}
            return
        for key in dirty | self.remade:
            if key in self.kept.members and key not in self.jobs:
                self.orphans.add(key)
            else:
                self.orphans.discard(key)

    def _drop_job(self, key: str) -> None:
        job = self.jobs.pop(key, None)
        if job is None:
            return
        del self.positions[key]
        self._unlist(job)
        self.groups.pop(key, None)
        self.invalid.pop(key, None)
        for pod in self.kept.members.get(key, ()):
            self.jobs_by_task.pop(pod, None)

    def _build(self, group: PodGroup) -> None:
        self.invalid.pop(group.key, None)
        if needs_tree(group):
            self._build_tree(group)
            return
        if group.sub_groups:
            pod_sets = {s.name: PodSet(s.name, s.min_member, tracked=True) for s in group.sub_groups}
        else:
            pod_sets = {DEFAULT_SUBGROUP: PodSet(DEFAULT_SUBGROUP, max(group.min_member, 1), tracked=True)}
        job = Job(group, group.queue, pod_sets, group.preemptible, group.priority, stale_since=group.stale_since)
        for pod_key in sorted(self.kept.members.get(group.key, ())):
            task = self.kept.tasks[pod_key]
            name = task.subgroup if task.subgroup in pod_sets else DEFAULT_SUBGROUP
            pod_set = pod_sets.get(name)
            if pod_set is None:
                pod_set = pod_sets[name] = PodSet(name, 0, tracked=True)
            pod_set.add(task)
            self.jobs_by_task[pod_key] = job
        self._keep(group, job)

    def _build_tree(self, group: PodGroup) -> None:
        """A job with a sub-group tree or topology constraints, as ``session._build_tree_job``
        makes it; pods that name no leaf wait with KAI's reason."""
        members = sorted(self.kept.members.get(group.key, ()))
        pod_sets, invalid = leaf_pod_sets(group, (self.kept.tasks[k] for k in members))
        job = Job(group, group.queue, pod_sets, group.preemptible, group.priority, stale_since=group.stale_since)
        job.tree = build_tree(group, pod_sets)
        for pod_key in members:
            if pod_key in invalid:
                self.jobs_by_task.pop(pod_key, None)
            else:
                self.jobs_by_task[pod_key] = job
        if invalid:
            self.invalid[group.key] = invalid
        self._keep(group, job)

    def _keep(self, group: PodGroup, job: Job) -> None:
        """A job made (again) from its group: it replaces the old one, also in its queue's sum."""
        self.job_changes += 1
        self.remade.add(job.key)
        old = self.jobs.get(group.key)
        if old is not None:
            self._unlist(old)
        else:  # a new key goes to the end of the jobs' order
            self.positions[group.key] = self._next_position
            self._next_position += 1
        self.jobs[group.key] = job
        self.groups[group.key] = group
        self.unsummed.add(job.key)
        if group.last_start is not None:
            self.last_start[job.key] = group.last_start
        if group.stale_since is not None or job.is_stale():
            self.stale_watch.add(job.key)
        if not job.ready_for_scheduling():
            self.not_ready.add(job.key)

    def _unlist(self, job: Job) -> None:
        """The job is gone or replaced: its contribution leaves its queue's sum."""
        self.job_changes += 1
        self.remade.add(job.key)
        self.totals.remove(job.key)
        self.unsummed.discard(job.key)
        self.stale_watch.discard(job.key)
        self.not_ready.discard(job.key)
        self.last_start.pop(job.key, None)

    # ------------------------------------------------------------------ queues
    def queues(self, model: ClusterModel, total: np.ndarray) -> QueueState:
        if self.queues_version != model.queues_version:
            self.tree = QueueTree.build([queue_spec(q) for q in model.queues.values()])
            self.queues_version = model.queues_version
        tree = self.tree
        for key in self.unsummed:  # jobs made since the last session; their tasks are as recorded
            job = self.jobs[key]
            self.totals.put(job.queue, key, self._sums(job))
        self.unsummed.clear()
        sums = np.zeros((len(tree), 9))
        for queue, summed in self.totals.totals().items():
            leaf = tree.index.get(queue)
            if leaf is not None:
                sums[leaf] += summed
        if model.gated:  # summed afresh: admission walks every gated pod each cycle anyway
            demand = gated_demand(model.gated.values(), model.pod_groups, self.config.schedulerName)
            add_gated_demand(sums[:, 0:3], tree.index, demand)
        request, allocated, allocated_np = (tree.roll_up(sums[:, k : k + 3].copy()) for k in (0, 3, 6))
        usage = usage_array(tree, model.queue_usage) if model.queue_usage else None
        division = divide(tree, total, request, usage, self.config.kValue)
        return QueueState(tree, division.fair_share, request, allocated, allocated_np, total)

    def _sums(self, job: Job) -> Sums:
        """The job's contribution to its queue's sums; its tasks are as their pod records say."""
        row = [0.0] * 9
        add_queue_sums(row, job, self._requested)
        return (row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8])

    def _requested(self, task: Task) -> tuple[float, float, float]:
        pod = task.pod
        return (requested_gpus(pod), pod.requests.cpu, pod.requests.memory)
