"""A cycle's result for a caller in another process, sent as what changed since the last one.

A ``CycleResult`` names every pod three times (its decision, its queue, its job) and every pod
group once. Pickled whole, those maps are thousands of small objects, and shipping them cost a
remote caller more than the cycle itself (5,000 nodes and 2,500 pods: about 50 ms of CPU to
pickle and unpickle against a 17 ms cycle). Between two cycles few entries change, so the
sender ships each of these maps as the entries that differ from the map it sent before, with
the keys in order only when they are not the same keys in the same order, and the receiver
rebuilds an equal map in the same order. Everything else in a result is small and goes as it is.

Each end keeps the last result it sent or received, numbered. The caller says which one it
holds, and the sender compares against its own only when the numbers match; otherwise it
sends every entry. A result lost on the way costs one full result, never a wrong one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import compress, filterfalse
from operator import is_not
from typing import Generic, TypeVar

from coordinator.decisions import PodDecision
from coordinator.results import CycleResult

V = TypeVar("V")
_MISSING = object()


@dataclass(frozen=True, slots=True)
class MapChange(Generic[V]):
    """A map as a change from the one before: its keys in order are the old ones less
    ``removed``, then the new ones in ``values``' order, unless ``keys`` spells them out."""

    keys: tuple[str, ...] | None  # every key, in order, where the rule above does not give it
    removed: tuple[str, ...]
    values: dict[str, V]  # the entries that are new or differ from the map before


@dataclass(frozen=True, slots=True)
class ResultChange:
    number: int
    base: int  # the result whose maps these change (0: none, every entry is here)
    shell: CycleResult  # the result without the four maps below
    pods: MapChange[PodDecision]
    pod_groups: MapChange[PodDecision]
    pod_queues: MapChange[str]
    pod_jobs: MapChange[str]


@dataclass(frozen=True, slots=True)
class _Maps:
    pods: dict[str, PodDecision]
    pod_groups: dict[str, PodDecision]
    pod_queues: dict[str, str]
    pod_jobs: dict[str, str]

    @staticmethod
    def of(result: CycleResult) -> _Maps:
        # Copies: what a side keeps must not change when the caller changes what it was given.
        decisions = result.decisions
        return _Maps(dict(decisions.pods), dict(decisions.pod_groups), dict(result.pod_queues), dict(result.pod_jobs))


class ResultSender:
    """The coordinator's side: each result as a change from the last one the caller holds."""

    def __init__(self) -> None:
        self.number = 0
        self._last: _Maps | None = None

    def send(self, result: CycleResult, held: int) -> ResultChange:
        last = self._last if held and held == self.number else None
        maps = _Maps.of(result)
        self.number += 1
        self._last = maps
        shell = replace(result, decisions=replace(result.decisions, pods={}, pod_groups={}), pod_queues={}, pod_jobs={})
        return ResultChange(
            self.number,
            held if last is not None else 0,
            shell,
            _change(maps.pods, last.pods if last else None),
            _change(maps.pod_groups, last.pod_groups if last else None),
            _change(maps.pod_queues, last.pod_queues if last else None),
            _change(maps.pod_jobs, last.pod_jobs if last else None),
        )


class ResultReceiver:
    """The caller's side: rebuilds each result from the change and the last result it holds."""

    def __init__(self) -> None:
        self.held = 0  # the number of the last result received (0: none)
        self._last = _Maps({}, {}, {}, {})

    def receive(self, change: ResultChange) -> CycleResult:
        if change.base and change.base != self.held:
            raise ValueError(f"a change from result {change.base}, but result {self.held} is held")
        last = self._last if change.base else _Maps({}, {}, {}, {})
        maps = _Maps(
            _rebuilt(change.pods, last.pods),
            _rebuilt(change.pod_groups, last.pod_groups),
            _rebuilt(change.pod_queues, last.pod_queues),
            _rebuilt(change.pod_jobs, last.pod_jobs),
        )
        self.held = change.number
        self._last = maps
        shell = change.shell
        return replace(
            shell,
            decisions=replace(shell.decisions, pods=dict(maps.pods), pod_groups=dict(maps.pod_groups)),
            pod_queues=dict(maps.pod_queues),
            pod_jobs=dict(maps.pod_jobs),
        )


def _change(new: dict[str, V], old: dict[str, V] | None) -> MapChange[V]:
    if old is None:
        return MapChange(tuple(new), (), new)
    order = list(new)
    # The entries not the very same object as before, found without a Python step per entry
    # (the session reuses the decisions it did not redo); of those, the ones that differ.
    suspects = compress(order, map(is_not, map(old.get, order), new.values()))
    missing = _MISSING
    values = {k: new[k] for k in suspects if old.get(k, missing) != new[k]}
    if len(new) == len(old) and order == list(old):
        return MapChange(None, (), values)
    # Usually pods come and go and the rest keep their order: say which went, not every key.
    kept = list(filter(new.__contains__, old))
    if order[: len(kept)] == kept and not any(map(old.__contains__, order[len(kept) :])):
        return MapChange(None, tuple(filterfalse(new.__contains__, old)), values)
    return MapChange(tuple(order), (), values)


def _rebuilt(change: MapChange[V], old: dict[str, V]) -> dict[str, V]:
    values = change.values
    if change.keys is None:
        out = dict(old)
        for key in change.removed:
            del out[key]
        out.update(values)  # a key kept stays where it was, a new one goes last
        return out
    return {k: values[k] if k in values else old[k] for k in change.keys}
