"""KAI's scheduler plugins by name: which are on, in which order, as KAI's operator resolves them.

A SchedulingShard's ``plugins`` maps a plugin name to ``enabled``, ``priority`` and
``arguments``; KAI's operator lays that over its defaults (every built-in plugin on, spaced
priorities, ``gpupack``/``gpusharingorder`` with GPU bin-packing, ``gpuspread`` otherwise) and
hands the scheduler the enabled plugins, highest priority first, then by name. Order matters
where plugins register order functions: the first function with an opinion decides (the job
order's ``priority`` before ``elastic`` by default). kai-ray reads the same mapping and resolves
it the same way; the coordinator registers each enabled plugin's hooks
(``coordinator.plugins``) and the shards score with the enabled node-order plugins.

Not every plugin can be turned off in kai-ray: ``proportion`` (the fair share itself),
``predicates`` and ``nodeplacement`` are what the scheduler is built on. Turning one of those
off is accepted and warned about, never silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

# KAI's operator defaults (SchedulingShard setDefaultPlugins): higher runs first.
DEFAULT_PRIORITIES: Mapping[str, int] = {
    "predicates": 1900,
    "proportion": 1800,
    "priority": 1700,
    "nodeavailability": 1600,
    "resourcetype": 1500,
    "podaffinity": 1400,
    "elastic": 1300,
    "kubeflow": 1200,
    "ray": 1100,
    "subgrouporder": 1000,
    "taskorder": 900,
    "nominatednode": 800,
    "dynamicresources": 700,
    "minruntime": 600,
    "topology": 500,
    "snapshot": 400,
    "gpupack": 300,
    "gpuspread": 300,
    "nodeplacement": 200,
    "gpusharingorder": 100,
}

# Plugins whose hooks kai-ray leaves out when they are off: the job order's parts, the minimum
# runtime's victim filters and scenario validators, node-order scorers.
SWITCHABLE = frozenset({"priority", "elastic", "minruntime", "nodeavailability", "resourcetype", "gpusharingorder"})
# Which GPU a fraction joins: set by placementStrategy.gpuDevice (KAI's operator derives the two
# plugins from the strategy the same way).
GPU_DEVICE = frozenset({"gpupack", "gpuspread"})
# Plugins that decide nothing (HTTP endpoints).
NO_DECISIONS = frozenset({"snapshot", "reflectjoborder"})
# Plugins only some priority orders distinguish: those registering job-order functions.
ORDERED = ("priority", "elastic")


class PluginSetting(Protocol):
    """One entry of the config's ``plugins`` mapping; unset fields keep KAI's default."""

    @property
    def enabled(self) -> bool | None: ...

    @property
    def priority(self) -> int | None: ...

    @property
    def arguments(self) -> Mapping[str, str] | None: ...


@dataclass(frozen=True, slots=True)
class ResolvedPlugins:
    """The enabled plugins in KAI's order, and what kai-ray will not do as configured."""

    names: tuple[str, ...]
    warnings: tuple[str, ...]

    def applies(self, name: str) -> bool:
        """Whether kai-ray applies the plugin: it is on, or kai-ray cannot turn it off."""
        return name in self.names or name not in SWITCHABLE

    def job_order(self) -> tuple[str, ...]:
        """The enabled plugins that order jobs, in the order their functions are asked."""
        return tuple(name for name in self.names if name in ORDERED)


def resolve(settings: Mapping[str, PluginSetting], gpu_binpack: bool) -> ResolvedPlugins:
    """KAI's operator merge: defaults, then the user's overrides, enabled ones sorted by priority
    (highest first), then by name."""
    enabled = {name: True for name in DEFAULT_PRIORITIES}
    enabled.update(gpupack=gpu_binpack, gpusharingorder=gpu_binpack, gpuspread=not gpu_binpack)
    priorities = dict(DEFAULT_PRIORITIES)
    warnings: list[str] = []
    for name, setting in settings.items():
        if setting.enabled is not None:
            enabled[name] = setting.enabled
        if setting.priority is not None:
            priorities[name] = setting.priority
            if name not in ORDERED and name not in NO_DECISIONS:
                ordered = " and ".join(ORDERED)
                warnings.append(f"plugins.{name}.priority changes nothing in kai-ray: only {ordered} order jobs")
        if setting.arguments is not None and name not in NO_DECISIONS:
            warnings.append(
                f"plugins.{name}.arguments are not read: kai-ray takes them from its own fields "
                "(placementStrategy, kValue, reclaimerSaturationMultiplier, default*MinRuntime)"
            )
        if name in GPU_DEVICE and setting.enabled is not None:
            warnings.append(
                f"plugins.{name}.enabled is not read: placementStrategy.gpuDevice picks gpupack or gpuspread"
            )
    for name in sorted(DEFAULT_PRIORITIES):
        if not enabled[name] and name not in SWITCHABLE | GPU_DEVICE | NO_DECISIONS:
            warnings.append(f"plugins.{name} is off, but kai-ray cannot turn it off: it applies all the same")
    names = sorted((name for name, on in enabled.items() if on), key=lambda n: (-priorities.get(n, 0), n))
    return ResolvedPlugins(tuple(names), tuple(warnings))


def known(name: str) -> bool:
    return name in DEFAULT_PRIORITIES or name in NO_DECISIONS
