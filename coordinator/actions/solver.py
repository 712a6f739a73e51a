"""Finding victims for a pending job (KAI's JobSolver, shared by reclaim, preempt, consolidation).

The job is grown one pod at a time. For each step, victims are added one job-chunk at a
time from the victims queue (most over-served queue first, least important job first),
and each candidate scenario is simulated: evict the victims, then place victims' jobs
again where possible (they are *moved*, not killed) and the pending pods, in fair
order, all pipelined. A solution must pass the action's validator; its victims are
kept ("recorded") for the next step. The job is solved when its gang is satisfied.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from coordinator.actions.allocate import allocate_job
from coordinator.actions.gpu_headroom import gpu_headroom_all
from coordinator.actions.paused_searches import PauseRule, SearchPaused
from coordinator.actions.scenario import Scenario, job_with_tasks
from coordinator.actions.scenario_filters import SCENARIO_FILTERS, ScenarioFilter
from coordinator.actions.victims import SortedJobs
from coordinator.job_order import JobOrder
from coordinator.jobs import Job
from coordinator.session import SessionState
from coordinator.statement import Statement
from coordinator.tasks import Status, Task
from placement.placer import Mask

Validator = Callable[[Scenario], bool]
VictimsQueueFactory = Callable[[], JobOrder]


@dataclass(slots=True)
class Solution:
    victims: list[Task]
    victim_jobs: list[Job]  # the chunks they came in, recorded for the job's next step


def _chunks_of(scenario: Scenario, tasks: list[Task]) -> list[Job]:
    """The scenario's victim chunks that hold any of ``tasks``, each once, in the scenario's order."""
    wanted = {id(t) for t in tasks}
    chunks: list[Job] = []
    taken: set[int] = set()  # a gang's search records hundreds of chunks: no list scan per chunk
    for job_chunks in scenario.chunks_by_job.values():
        for chunk in job_chunks:
            if id(chunk) not in taken and any(id(t) in wanted for t in chunk.tasks):
                taken.add(id(chunk))
                chunks.append(chunk)
    return chunks


class SearchBudget:
    """How many victim scenarios may be simulated: per step of a job's search (the job grown by
    one more pod) and per action. KAI bounds its search with time budgets; counting scenarios
    keeps decisions the same from run to run.

    The action's count is checked when a job's search starts: a search once started runs to its
    end, each of its steps bounded. A gang of N pods needs at least N scenarios (one per step),
    so a bound on the job's whole search would make every gang above it unsolvable, in every
    cycle: KAI (unbounded in v0.12) reclaims such gangs."""

    def __init__(self, per_step: int, per_action: int) -> None:
        self.per_step = per_step
        self.left = per_action
        self.step_left = per_step

    def start_job(self) -> bool:
        """Whether the action may search for one more job."""
        return self.left > 0

    def start_step(self) -> None:
        self.step_left = self.per_step

    def take(self) -> bool:
        if self.step_left <= 0:
            return False
        self.left -= 1
        self.step_left -= 1
        return True


class JobSolver:
    def __init__(
        self,
        state: SessionState,
        stmt: Statement,
        action: str,
        validator: Validator,
        victims_queue: VictimsQueueFactory,
        pending: SortedJobs,
        budget: SearchBudget | None = None,
        ceiling: Callable[[], np.ndarray | None] = lambda: None,
        keeps_minimum: Callable[[Job], bool] = lambda _: False,
        pauses: PauseRule | None = None,
    ) -> None:
        self.state = state
        self.stmt = stmt
        self.action = action
        self.validator = validator
        self.victims_queue = victims_queue
        self.pending = pending  # jobs with pending pods, per queue in job order (the action's)
        self.ceiling = ceiling  # scenario.gpu_ceiling of the session as it is, or None if unknown
        self.keeps_minimum = keeps_minimum  # victims that give only their pods beyond the gang minimum
        self.budget = budget or SearchBudget(state.config.maxScenariosPerJob, state.config.maxScenariosPerAction)
        self.pauses = pauses  # None: the search runs to its end whatever the time

    def solve(self, job: Job) -> bool:
        """Try to make room for ``job``; on success the statement holds the evictions and
        placements, on failure nothing is left changed. Past the time budget (``pauses``) the
        search stops between two steps, leaving nothing changed, and raises ``SearchPaused``;
        the same action reaching the job next cycle goes on from that step."""
        if not self.budget.start_job():
            return False  # the action searched enough this cycle; the job is tried again next cycle
        start = self.stmt.checkpoint()
        original_active = job.active_used()
        tasks = job.tasks_to_allocate(real=False)
        feasible = self._feasible_rows(job)
        recorded: list[Job] = []
        first = 1
        pauses = self.pauses
        resumed = pauses.searches.resume(self.action, job, tasks, self.state) if pauses is not None else None
        if resumed is not None:
            done, recorded = resumed
            first = done + 1
        solved_all = False
        for n in range(first, len(tasks) + 1):
            if pauses is not None and n > first and pauses.due():  # every call takes one step at least
                pauses.searches.pause(self.action, job, tasks, n - 1, recorded)
                self.stmt.rollback(start)
                raise SearchPaused(n - 1, len(tasks))
            partial = job_with_tasks(job, tasks[:n], min_from_tasks=True)
            step = self.stmt.checkpoint()
            self.budget.start_step()
            solution = self._solve_partial(partial, tasks[:n], recorded, feasible)
            if solution is None:
                break
            recorded = solution.victim_jobs
            if n < len(tasks):
                self.stmt.rollback(step)
            else:
                solved_all = True
        if solved_all and job.gang_satisfied() and job.active_used() > original_active:
            return True
        self.stmt.rollback(start)
        return False

    # ------------------------------------------------------------ one step
    def _solve_partial(self, partial: Job, pending: list[Task], recorded: list[Job], feasible: Mask) -> Solution | None:
        scenario = Scenario(partial, pending, list(recorded))
        nodes = self._with_nodes_of(feasible, scenario.recorded_tasks)
        filters = self._filters(scenario, nodes)
        if filters is None:
            return None  # every scenario would fail a filter: no victim is worth popping
        queue = self.victims_queue()
        recorded_keys = {t.key for t in scenario.recorded_tasks}
        first = True
        while True:
            if not first and not self._add_next_victims(scenario, queue, recorded_keys):
                return None
            first = False
            if not all(f.passes(scenario) for f in filters):
                continue
            if not self.budget.take():
                return None  # searched enough for this step; the job is tried again next cycle
            solution = self._try_scenario(scenario, nodes)
            if solution is not None:
                return solution

    def _filters(self, scenario: Scenario, nodes: Mask) -> list[ScenarioFilter] | None:
        """The scenario filters that apply to this step, or None when one of them rules out every
        scenario the step could build."""
        ceiling = self.ceiling()
        filters: list[ScenarioFilter] = []
        for make in SCENARIO_FILTERS.values():
            made = make(self.state, scenario, nodes)
            if made is None:
                continue
            if ceiling is not None and not made.could_ever_pass(ceiling):
                return None
            filters.append(made)
        return filters

    def _add_next_victims(self, scenario: Scenario, queue: JobOrder, recorded: set[str]) -> bool:
        """Pop victim chunks until one adds new potential victims; False when none are left."""
        while not queue.empty():
            job = queue.pop()
            assert job is not None
            tasks = job.tasks
            if tasks and all(t.key in recorded for t in tasks):
                # Every pod of it is a victim already, so none of its chunks adds any, and nothing
                # of it goes back in the queue: skipped before working out its chunk. A gang's
                # search pops every recorded victim again at each step.
                continue
            chunk, more = job.tasks_to_evict(self.keeps_minimum(job))
            original = self.state.jobs[job.key]
            if any(t.key in recorded for t in chunk):
                remaining = [t for t in tasks if t.key not in recorded]
                if remaining:
                    queue.push(job_with_tasks(job, remaining))
                continue
            if more:
                chunk_ids = {id(t) for t in chunk}
                queue.push(job_with_tasks(job, [t for t in tasks if id(t) not in chunk_ids]))
            if chunk:
                scenario.add_potential(job_with_tasks(job, chunk), original)
                return True
        return False

    def _try_scenario(self, scenario: Scenario, nodes: Mask) -> Solution | None:
        """Simulate the scenario: with the recorded victims only, or node by node with the
        potential victims found there. A refusal by the validator ends the scenario."""
        stmt = self.stmt
        base = stmt.checkpoint()
        preemptor = scenario.preemptor.key
        with stmt.table.refreshed_once():  # nothing reads the rows between these evictions
            for task in scenario.recorded_tasks:
                self._evict(task, preemptor)
        attempts: list[list[Task]] = []
        if scenario.latest_job is None:
            if scenario.recorded_tasks:
                attempts.append([])
        else:
            for node in sorted({t.node for t in scenario.latest_job.tasks if t.node}):
                attempts.append(scenario.victim_tasks_on_node(node))
        for candidates in attempts:
            before = stmt.checkpoint()
            for task in candidates:
                self._evict(task, preemptor)
            allowed = self._with_nodes_of(nodes, candidates)
            verdict, solution = self._simulate(scenario, allowed, scenario.recorded_tasks + candidates)
            if verdict == "solved":
                return solution
            if verdict == "refused":
                break
            stmt.rollback(before)
        stmt.rollback(base)
        return None

    def _evict(self, task: Task, preemptor: str) -> None:
        if task.status.active_allocated:
            self.stmt.evict(task, self.action, preemptor)

    def _simulate(self, scenario: Scenario, allowed: Mask, victims: list[Task]) -> tuple[str, Solution | None]:
        """Place victims' jobs again and the pending pods, all pipelined, in fair order, on the
        ``allowed`` rows. Returns ("solved", solution), ("retry", None) or ("refused", None)."""
        state = self.state
        unique = list({id(t): t for t in victims}.values())
        victim_jobs = {state.jobs_by_task[t.key].key for t in unique}
        order = JobOrder(state.queues, lambda j: state.job_request(j, real=False), keys=state.hooks.job_keys)
        # The jobs this simulation acts on: the victims' jobs and the preemptor (a stand-in for
        # the pods this step places), with the keys they are ordered by (taken now, as the order
        # takes them on push), and how many of them each leaf queue holds.
        interesting = victim_jobs | {scenario.preemptor.key}
        acting = {key: state.jobs[key] for key in victim_jobs}
        acting[scenario.preemptor.key] = scenario.preemptor
        queues = state.queues  # a job outside the tree's leaves is never in the order: never acted on
        acting = {key: job for key, job in acting.items() if queues.has(job.queue) and queues.is_leaf(job.queue)}
        pushed_key = {key: order.key_of(job) for key, job in acting.items()}
        left = Counter(job.queue for job in acting.values())
        # KAI walks every pending job in fair order and skips those it does not act on: they
        # still decide which queue comes next. A queue's next job also stands for its parent
        # when the parent is compared with another queue, so every leaf under the same top-level
        # queue as a job acted on is offered, jobs or not; the leaves under other top-level
        # queues would only have their jobs popped and skipped, and are left out.
        lists = self.pending.by_queue()
        tops = {queues.path(queue)[-1] for queue in left}
        for queue, entries in lists.items():
            if queues.has(queue) and queues.is_leaf(queue) and queues.path(queue)[-1] in tops:
                order.push_sorted(queue, entries, lambda j: j.key not in interesting and j.has_pending())
        order.push_all(acting.values())
        placed_preemptor = False

        def act(job: Job) -> bool:
            """Pipeline the job; False when it is the preemptor and does not fit."""
            nonlocal placed_preemptor
            del acting[job.key]
            placed = allocate_job(state, self.stmt, job, pipeline_only=True, real=False, allowed=allowed)
            if job is scenario.preemptor:
                placed_preemptor = placed
                return placed
            return True

        while acting:
            if len(left) == 1:
                # What is left to act on sits in one leaf queue: nothing in other queues, and no
                # job skipped in between, can change their order, which is the leaf's own (its
                # jobs' keys are unique). Acting on them now saves popping every pending job of
                # the queues involved: in a reclaim storm, thousands per simulation.
                for job in sorted(acting.values(), key=lambda j: pushed_key[j.key]):
                    if not act(job):
                        return "retry", None
                break
            popped = order.pop()
            if popped is None:
                break
            if acting.get(popped.key) is popped:
                left[popped.queue] -= 1
                if not left[popped.queue]:
                    del left[popped.queue]
                if not act(popped):
                    return "retry", None
        if not placed_preemptor:
            return "retry", None
        if not self.validator(scenario):
            return "refused", None
        chosen = [t for t in unique if t.status in (Status.RELEASING, Status.PIPELINED)]
        return "solved", Solution(chosen, _chunks_of(scenario, chosen))

    def _feasible_rows(self, job: Job) -> Mask:
        """KAI's FeasibleNodesForJob, as a mask over the table's rows: GPU jobs only consider
        nodes with some free or freeing GPU. The search works on row masks, never on sets of
        node names: a step's nodes are most of the cluster, and a pass over them in Python per
        scenario would make each contended job's cost grow with the cluster."""
        table = self.state.table
        if any(not t.shape.wants_gpu for t in job.tasks):
            return table.present.copy()
        return table.present & (gpu_headroom_all(table) > 0)

    def _with_nodes_of(self, rows: Mask, tasks: Iterable[Task]) -> Mask:
        """``rows`` and the rows of the nodes ``tasks`` run on (a victim's node is always
        considered, free GPU or not); ``rows`` itself is left as it was."""
        index = self.state.table.index
        extra = [row for t in tasks if t.node and (row := index.get(t.node)) is not None]
        if not extra:
            return rows
        widened = rows.copy()
        widened[extra] = True
        return widened
