"""The loop that reclaim, preempt and consolidation share: pending jobs in fair order, each
searched for victims that make room for it (KAI's three victim-search actions).

For every job the base class does the same steps; an action fills in the parts that differ:

1. ``screen``: checks KAI makes before anything else (reclaim: may the job's queue reclaim at
   all?). A job screened out is not searched and does not count as a failed search.
2. Search pruning (``search_pruning.should_search``): paused jobs, and jobs no easier than one
   with the same signature that already failed in this session.
3. ``precheck``: cheap checks after pruning; they may skip the job or record a failed search.
   A job whose first pod asks more GPUs than any node has fails here without a look at nodes.
   The search (and a precheck that looks at nodes) looks at every node, so the first job to get
   this far moves the session onto every node's row (``SessionState.every_node``); the earlier
   steps look at queues and jobs only.
4. The search itself (``solver.JobSolver``) over the action's ``victims`` queue, judged by its
   ``validator``. Success commits and refreshes the victim pool; failure is recorded, so that
   signatures and the backoff see it.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import ClassVar

import numpy as np

from coordinator.actions.allocate import eligible_jobs
from coordinator.actions.gpu_headroom import gpu_ceiling
from coordinator.actions.paused_searches import PauseRule, SearchPaused
from coordinator.actions.scenario import Scenario
from coordinator.actions.search_pruning import FailedSearches, search_failed, should_search
from coordinator.actions.solver import JobSolver, SearchBudget, Validator
from coordinator.actions.victims import VictimLists, VictimPool
from coordinator.job_order import JobOrder
from coordinator.job_timers import delay_message, within_preemption_delay
from coordinator.jobs import Job
from coordinator.plugins import ScenarioValidatorHook, VictimAccept
from coordinator.session import SessionState
from coordinator.statement import Statement

Refused = Callable[[ScenarioValidatorHook, str], None]
GUARANTEED_SHARE = 0.1  # of sessionTimeBudget, that each victim-search action may always spend


def _delayed(state: SessionState, job: Job) -> bool:
    """KAI v0.17: a job inside its preemption delay window triggers no evictions yet."""
    if not within_preemption_delay(job, state.now):
        return False
    job.fit_errors["preemption delay"] = delay_message(job)
    return True


class Precheck(enum.Enum):
    SEARCH = "search"  # look for victims
    SKIP = "skip"  # not searched; not a failed search either
    FAILED = "failed"  # not searched, and counted as a failed search (signatures, backoff)


def fits_no_node(state: SessionState, job: Job) -> bool:
    """Whether the first pod a search would place asks more whole GPUs than any node has: the
    search's first step fails the idle-GPU filter at once (no node's ceiling can reach it), so
    the job is failed without moving the session onto every node's row."""
    largest = state.largest_node_gpus
    if largest is None:
        return False
    tasks = job.tasks_to_allocate(real=False)
    if not tasks:
        return False
    pod = tasks[0].pod
    return pod.gpu_share is None and not pod.resource_claims and pod.requests.gpu > largest


def always_valid(_: Scenario) -> bool:
    return True


class CeilingUntilCommit:
    """``scenario.gpu_ceiling`` worked out on the first search that asks, and valid until the
    action's first commit (a failed search leaves the session as it found it); None after."""

    def __init__(self, state: SessionState) -> None:
        self.state = state
        self._value: np.ndarray | None = None
        self._known = True

    def get(self) -> np.ndarray | None:
        if self._known and self._value is None:
            self._value = gpu_ceiling(self.state)
        return self._value if self._known else None

    def forget(self) -> None:
        self._known, self._value = False, None


# The fit-error key under which a job not reached by a victim search before the time budget
# says so (one for every such action).
POSTPONED = "victim searches"


class VictimSearchAction:
    """Base of the victim-search actions; subclasses set ``name`` and override the hooks."""

    name: str
    time_bounded = True  # stops at the cycle's time budget (sessionTimeBudget)
    # Whether a failed search rules out same-signature jobs of its own queue only (reclaim,
    # preempt: victims depend on the queue) or of every queue (consolidation).
    signatures_per_queue: ClassVar[bool] = True
    # Whether only preemptible pending jobs are candidates (consolidation).
    preemptible_jobs_only: ClassVar[bool] = False
    # Whether ``precheck`` looks at nodes (then the session moves onto every node's row before it).
    precheck_looks_at_nodes: ClassVar[bool] = False

    def execute(self, state: SessionState, stmt: Statement) -> None:
        if not self.enabled(state):
            return
        order = JobOrder(state.queues, lambda j: state.job_request(j, real=False), keys=state.hooks.job_keys)
        order.push_all(
            job
            for job in eligible_jobs(state, pending_only=True, preemptible_only=self.preemptible_jobs_only)
            if not _delayed(state, job)
        )
        budget = SearchBudget(state.config.maxScenariosPerJob, state.config.maxScenariosPerAction)
        # The lists of running and pending jobs, carried over from earlier actions and cycles with
        # the jobs changed since (the statement's changes so far in this session among them).
        pool, pending = (state.searches.lists or VictimLists()).for_session(state, stmt.take_changed())
        ceiling = CeilingUntilCommit(state)

        failed = FailedSearches(per_queue=self.signatures_per_queue)
        # However long the rest of the cycle took, the action takes the first job in fair order
        # and a share of the budget: every cycle moves contended jobs on, so no queue starves.
        guaranteed = time.perf_counter() + GUARANTEED_SHARE * (state.config.sessionTimeBudget or 0.0)

        def spent() -> bool:
            return state.searches.out_of_time() and time.perf_counter() > guaranteed

        kept = state.searches.resumable
        pauses = PauseRule(kept, spent) if kept is not None else None
        first = True
        while not order.empty():
            if not first and spent():
                self._postpone(state, order.remaining())
                break
            first = False
            job = order.pop()
            assert job is not None
            state.deciding = job.key
            if kept is not None and kept.under_way_elsewhere(self.name, job.key):
                continue  # another action's search for it goes on next cycle: it would place it
            # Taken before the search: placing the job's pods in a scenario changes what the
            # session would compute for it, and the victim filter must keep judging the request.
            request = state.job_request(job, real=False)
            if not self.screen(state, job, request) or not should_search(state, job, failed, self.name):
                continue
            if self.precheck_looks_at_nodes:
                if fits_no_node(state, job):
                    search_failed(state, job, failed, self.name)
                    continue
                state.every_node()  # from here on the job is judged on nodes: all of them
            verdict = self.precheck(state, job, request)
            if verdict is Precheck.SKIP:
                continue
            if verdict is Precheck.SEARCH and fits_no_node(state, job):
                verdict = Precheck.FAILED
            if verdict is Precheck.SEARCH:
                state.every_node()
                victims = partial(self.victims, state, pool, job, request)
                solver = JobSolver(
                    state,
                    stmt,
                    self.name,
                    self.validator(state, job),
                    victims,
                    pending,
                    budget,
                    ceiling.get,
                    self.keeper(state, job),
                    pauses,
                )
                try:
                    solved = solver.solve(job)
                except SearchPaused as paused:
                    self._postpone(state, order.remaining())
                    self._still_searching(state, job, paused)
                    break
                if solved:
                    stmt.commit()
                    ceiling.forget()  # who runs where has changed
                    changed = stmt.take_changed()  # a commit changes who runs and who waits
                    pool.refresh(changed)
                    pending.refresh(changed)
                    continue
            search_failed(state, job, failed, self.name)
        state.deciding = None

    def _postpone(self, state: SessionState, jobs: Iterable[Job]) -> None:
        """The cycle's time budget is spent: the jobs not reached say so, and are searched next
        cycle, in the same fair order (nothing counts against them: no failed search, no pause)."""
        state.searches.cut_short = True
        budget = state.config.sessionTimeBudget or 0.0
        # The same words whichever actions did not reach the job: in a storm some cycles' later
        # actions reach the deadline and some do not, and words naming them would rewrite
        # thousands of waiting pods' status every cycle.
        why = f"postponed to the next cycle: this cycle spent its time budget ({budget:g}s)"
        for job in jobs:
            job.fit_errors[POSTPONED] = why
            state.searches.skipped[job.key] = why

    def _still_searching(self, state: SessionState, job: Job, paused: SearchPaused) -> None:
        """The job whose search stopped half-way at the budget says so; it goes on from there."""
        budget = state.config.sessionTimeBudget or 0.0
        # The same words every cycle the search goes on: a reason that changed each cycle would
        # rewrite every pod's status each cycle (a 500-pod gang: 500 PATCHes a second).
        why = (
            f"{self.name} is still looking for room for its {paused.pods} pods: the search outlasts "
            f"a cycle's time budget ({budget:g}s) and goes on each cycle from where it stopped"
        )
        job.fit_errors[self.name] = why
        state.searches.skipped[job.key] = why

    # ------------------------------------------------------------ the parts actions override
    def enabled(self, state: SessionState) -> bool:
        """Whether the action runs at all in this session."""
        return True

    def screen(self, state: SessionState, job: Job, request: np.ndarray) -> bool:
        """Checks before search pruning; False leaves the job alone (say why in its fit errors)."""
        return True

    def precheck(self, state: SessionState, job: Job, request: np.ndarray) -> Precheck:
        """Checks after search pruning, before the search."""
        return Precheck.SEARCH

    def validator(self, state: SessionState, job: Job) -> Validator:
        """What a scenario that places the job must also satisfy."""
        return always_valid

    def victims(self, state: SessionState, pool: VictimPool, job: Job, request: np.ndarray) -> JobOrder:
        """The victims queue for one search step (called afresh for every step)."""
        raise NotImplementedError

    def keeper(self, state: SessionState, job: Job) -> VictimAccept:
        """Which victims give only their surplus in ``job``'s search."""
        return self.plugin_keeper(state, job)

    # ------------------------------------------------------------ what plugins registered
    def plugin_filter(self, state: SessionState, job: Job, kept_out: set[str] | None = None) -> VictimAccept:
        """The victim filters the session's plugins registered for this action, for ``job``: a
        victim passes when every one accepts it; ``kept_out`` collects what refused ones say."""
        filters = [(hook.keeps_out, hook.make(state, job)) for hook in state.hooks.filters_for(self.name)]

        def accept(victim: Job) -> bool:
            for says, accepts in filters:
                if not accepts(victim):
                    if kept_out is not None:
                        kept_out.add(says)
                    return False
            return True

        return accept

    def plugin_keeper(self, state: SessionState, job: Job, kept_out: set[str] | None = None) -> VictimAccept:
        """The minimum keepers the session's plugins registered for this action, for ``job``: a
        victim keeps its minimum when one of them says so; ``kept_out`` collects what they say."""
        keepers = [(hook.keeps_out, hook.make(state, job)) for hook in state.hooks.keepers_for(self.name)]

        def keeps(victim: Job) -> bool:
            for says, keeps_minimum in keepers:
                if keeps_minimum(victim):
                    if kept_out is not None:
                        kept_out.add(says)
                    return True
            return False

        return keeps

    def plugin_validator(self, state: SessionState, job: Job, refused: Refused | None = None) -> Validator:
        """The scenario validators the session's plugins registered for this action, asked in
        plugin order; the first refusal decides and goes to ``refused``."""
        checks = [(hook, hook.make(state, job)) for hook in state.hooks.validators_for(self.name)]

        def valid(scenario: Scenario) -> bool:
            for hook, check in checks:
                why = check(scenario)
                if why is not None:
                    if refused is not None:
                        refused(hook, why)
                    return False
            return True

        return valid
