"""The session's extension points: what a plugin may register, each a small typed seam.

KAI's plugins register functions on the session (``ssn.AddJobOrderFn``,
``AddReclaimVictimFilterFn``, ``AddReclaimScenarioValidatorFn`` …) and the actions ask the
session, never a plugin by name. kai-ray does the same with these points:

- ``job_keys``: the job order inside a queue (and its reverse, the victim order), composed from
  the job-order plugins in their configured order;
- ``victim_filters[action]``: which running jobs a preemptor may take at all;
- ``minimum_keepers[action]``: which of those may give only their pods beyond their gang
  minimum, never the gang itself (a search then offers their surplus and stops there);
- ``scenario_validators[action]``: what a whole victim scenario must also satisfy;
- ``node_holds``: nodes held for some jobs in a session, which allocate keeps other jobs off
  (kai-ray's reservations for gangs that waited too long, with their backfill rule).

Node-order plugins are the shards' band scorers (``placement.scorers``); the placement policy
carries which are on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from coordinator.jobs import Job
from coordinator.tasks import Task
from kai_ray.plugins import ResolvedPlugins

if TYPE_CHECKING:
    from coordinator.session import SessionState

JobKey = Callable[[Job], tuple[object, ...]]
Mask = npt.NDArray[np.bool_]
VictimAccept = Callable[[Job], bool]


class ScenarioView(Protocol):
    """What a validator sees of a victim scenario."""

    @property
    def victims(self) -> dict[str, list[Task]]: ...  # job key -> its tasks the scenario evicts

    @property
    def pending(self) -> list[Task]: ...  # the preemptor's pods the scenario places


ScenarioCheck = Callable[[ScenarioView], str | None]  # why the scenario is refused, or None


@dataclass(frozen=True, slots=True)
class JobKeys:
    """The job order (smaller first) and the victim order (the job scheduled last first)."""

    order: JobKey
    victim: JobKey


# KAI's default plugins' order (priority, then elastic), as the job's own methods.
KAI_KEYS = JobKeys(Job.order_key, Job.victim_key)


@dataclass(frozen=True, slots=True)
class VictimFilterHook:
    """A filter on victims for one search: made per preemptor, asked per running job."""

    plugin: str
    keeps_out: str  # what a reason says of the jobs it refuses ("within their reclaim minimum runtime")
    make: Callable[[SessionState, Job], VictimAccept]


@dataclass(frozen=True, slots=True)
class MinimumKeeperHook:
    """Which victims keep their gang minimum in one search: made per preemptor, asked per victim
    job as it comes up (True: only its surplus may be taken)."""

    plugin: str
    keeps_out: str  # what a reason says of the pods it keeps ("semi-preemptible, ...")
    make: Callable[[SessionState, Job], VictimAccept]


@dataclass(frozen=True, slots=True)
class ScenarioValidatorHook:
    """A check of whole scenarios for one search: made per preemptor, asked per scenario."""

    plugin: str
    protects: bool  # a refusal protects victims (rather than breaking a rule between queues)
    make: Callable[[SessionState, Job], ScenarioCheck]


class NodeHolds(Protocol):
    """Nodes held for some jobs in one session (rows of the session's table)."""

    def closed_to(self, job: Job) -> Mask | None: ...  # the rows ``job`` may not take (None: none)

    def refusal(self, job: Job, where: Mask) -> str: ...  # why the held rows in ``where`` are not for it

    def holding(self, job: Job) -> str | None: ...  # what a job that holds nodes is told, if it holds any


@dataclass(frozen=True, slots=True)
class NodeHoldHook:
    """Made once per allocate: the session's holds, or None when nothing is held."""

    plugin: str
    make: Callable[[SessionState], NodeHolds | None]


@dataclass(frozen=True, slots=True)
class SessionHooks:
    plugins: ResolvedPlugins
    job_keys: JobKeys
    victim_filters: Mapping[str, tuple[VictimFilterHook, ...]]  # action -> filters, in plugin order
    scenario_validators: Mapping[str, tuple[ScenarioValidatorHook, ...]]
    minimum_keepers: Mapping[str, tuple[MinimumKeeperHook, ...]] = field(default_factory=dict)
    node_holds: tuple[NodeHoldHook, ...] = ()

    def filters_for(self, action: str) -> tuple[VictimFilterHook, ...]:
        return self.victim_filters.get(action, ())

    def keepers_for(self, action: str) -> tuple[MinimumKeeperHook, ...]:
        return self.minimum_keepers.get(action, ())

    def validators_for(self, action: str) -> tuple[ScenarioValidatorHook, ...]:
        return self.scenario_validators.get(action, ())
