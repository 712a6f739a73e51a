"""KAI's ``minruntime`` plugin: running jobs younger than their queue's minimum runtime are no
victims (elastic ones may still lose pods above their minimum), for preempt and for reclaim."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from coordinator.jobs import Job
from coordinator.min_runtime import scenario_validator, victim_filter
from coordinator.plugins.hooks import ScenarioCheck, ScenarioValidatorHook, ScenarioView, VictimAccept, VictimFilterHook

if TYPE_CHECKING:
    from coordinator.session import SessionState

Minimum = Callable[["SessionState", Job], Callable[[Job], float]]  # (state, preemptor) -> victim's minimum


def _reclaim_minimum(state: SessionState, preemptor: Job) -> Callable[[Job], float]:
    rules = state.min_runtimes
    return lambda victim: rules.reclaim(preemptor.queue, victim.queue)


def _preempt_minimum(state: SessionState, preemptor: Job) -> Callable[[Job], float]:
    rules = state.min_runtimes
    return lambda victim: rules.preempt(victim.queue)


def _filter(minimum: Minimum) -> Callable[[SessionState, Job], VictimAccept]:
    def make(state: SessionState, preemptor: Job) -> VictimAccept:
        return victim_filter(state.now, state.last_start, minimum(state, preemptor))

    return make


def _validator(minimum: Minimum, action: str) -> Callable[[SessionState, Job], ScenarioCheck]:
    def make(state: SessionState, preemptor: Job) -> ScenarioCheck:
        valid = scenario_validator(state.now, state.last_start, state.jobs, minimum(state, preemptor))

        def check(scenario: ScenarioView) -> str | None:
            return None if valid(scenario.victims) else f"within their {action} minimum runtime"

        return check

    return make


def victim_filters() -> dict[str, VictimFilterHook]:
    return {
        "reclaim": VictimFilterHook("minruntime", "within their reclaim minimum runtime", _filter(_reclaim_minimum)),
        "preempt": VictimFilterHook("minruntime", "within their preempt minimum runtime", _filter(_preempt_minimum)),
    }


def scenario_validators() -> dict[str, ScenarioValidatorHook]:
    return {
        "reclaim": ScenarioValidatorHook("minruntime", True, _validator(_reclaim_minimum, "reclaim")),
        "preempt": ScenarioValidatorHook("minruntime", True, _validator(_preempt_minimum, "preempt")),
    }
