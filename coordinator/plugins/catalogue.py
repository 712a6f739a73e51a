"""KAI's plugins by name and the hooks each registers; a config's resolved plugin list becomes
the session's hooks (``hooks_for``), in plugin order, as KAI's session registers them.

Plugins not listed here register nothing kai-ray's coordinator asks for: node-order plugins are
the shards' scorers, and the rest either apply always (``kai_ray.plugins`` warns when a config
turns one off) or decide nothing. A rule KAI builds into its framework rather than into a plugin
registers here under a name of kai-ray's own (``semipreemptible``); no config names it, so it
always applies. So does kai-ray's ``reservation``, which holds nothing unless the config's
``reservation`` option is set."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from coordinator.plugins import minruntime, proportion, reservation, semipreemptible
from coordinator.plugins.hooks import (
    MinimumKeeperHook,
    NodeHoldHook,
    ScenarioValidatorHook,
    SessionHooks,
    VictimFilterHook,
)
from coordinator.plugins.job_order import job_keys
from kai_ray.plugins import ResolvedPlugins

VICTIM_FILTERS: dict[str, Callable[[], dict[str, VictimFilterHook]]] = {
    "minruntime": minruntime.victim_filters,
    semipreemptible.NAME: semipreemptible.victim_filters,
}
MINIMUM_KEEPERS: dict[str, Callable[[], dict[str, MinimumKeeperHook]]] = {
    semipreemptible.NAME: semipreemptible.minimum_keepers,
}
NODE_HOLDS: dict[str, Callable[[], NodeHoldHook]] = {
    reservation.NAME: reservation.node_holds,
}
SCENARIO_VALIDATORS: dict[str, Callable[[], dict[str, ScenarioValidatorHook]]] = {
    "proportion": proportion.scenario_validators,
    "minruntime": minruntime.scenario_validators,
}


@lru_cache(maxsize=16)
def hooks_for(plugins: ResolvedPlugins) -> SessionHooks:
    """The session hooks of these plugins (made once per plugin list: they hold no session)."""
    # Plugins kai-ray cannot turn off register whatever the config says (the config warns).
    off_but_applied = sorted(
        name
        for name in {*VICTIM_FILTERS, *SCENARIO_VALIDATORS, *MINIMUM_KEEPERS, *NODE_HOLDS} - set(plugins.names)
        if plugins.applies(name)
    )
    active = [*plugins.names, *off_but_applied]
    filters: dict[str, list[VictimFilterHook]] = {}
    validators: dict[str, list[ScenarioValidatorHook]] = {}
    keepers: dict[str, list[MinimumKeeperHook]] = {}
    for name in active:
        if name in VICTIM_FILTERS:
            for action, hook in VICTIM_FILTERS[name]().items():
                filters.setdefault(action, []).append(hook)
        if name in SCENARIO_VALIDATORS:
            for action, check in SCENARIO_VALIDATORS[name]().items():
                validators.setdefault(action, []).append(check)
        if name in MINIMUM_KEEPERS:
            for action, keeper in MINIMUM_KEEPERS[name]().items():
                keepers.setdefault(action, []).append(keeper)
    return SessionHooks(
        plugins,
        job_keys(plugins.job_order()),
        {action: tuple(hooks) for action, hooks in filters.items()},
        {action: tuple(hooks) for action, hooks in validators.items()},
        {action: tuple(hooks) for action, hooks in keepers.items()},
        tuple(NODE_HOLDS[name]() for name in active if name in NODE_HOLDS),
    )
