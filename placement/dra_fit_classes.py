"""Nodes whose devices look alike give the same answer to "do these claims fit here?".

Whether a pod's claims can be allocated on a node depends on the node's devices in key order,
each seen as its driver, attributes and capacity (all a CEL selector or a count can read), and
on which of them are taken; never on the devices' names. A synthetic or a real cluster has a
few node types and thousands of nodes of each, so the allocator's search runs once per type
and state instead of once per node: at 50,000 nodes with 20,000 publishing GPUs through DRA,
the search ran 400,000 times over a benchmark's dozen cycles, each cycle's session asking
again for every node.

A ``FitClasses`` is shared by a table's device book and every session's copy of it: its maps
are pure (a device's looks -> a number, a node's looks and state -> a class, a class and the
claims -> a verdict), so what one cycle learned serves the next.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kai_ray.model import Device
    from placement.dra_demand import ClaimSpec

MAX_ENTRIES = 100_000  # classes or verdicts kept before starting over

# Per device of a node, in key order: free, free but an evicted pod still uses it (the search
# tries those last), held by a claim. A node with nothing taken has the empty state.
FREE, RELEASING, HELD = 0, 1, 2
Layout = tuple[int, ...]  # a node's device kinds, in key order
Taken = tuple[int, ...]


class FitClasses:
    def __init__(self) -> None:
        self._kinds: dict[tuple[object, ...], int] = {}
        self._classes: dict[tuple[Layout, Taken], int] = {}
        self._next_class = 0  # never reused: a copy may keep a class number the maps forgot
        self._verdicts: dict[tuple[tuple[ClaimSpec, ...], int], bool] = {}

    def kind(self, device: Device) -> int:
        looks = (device.driver, device.attributes, device.capacity)
        number = self._kinds.get(looks)
        if number is None:
            number = self._kinds[looks] = len(self._kinds)
        return number

    def class_of(self, layout: Layout, taken: Taken) -> int:
        key = (layout, taken)
        number = self._classes.get(key)
        if number is None:
            if len(self._classes) >= MAX_ENTRIES:
                self._classes.clear()
            number = self._classes[key] = self._next_class
            self._next_class += 1
        return number

    def verdict(self, specs: tuple[ClaimSpec, ...], node_class: int) -> bool | None:
        return self._verdicts.get((specs, node_class))

    def remember(self, specs: tuple[ClaimSpec, ...], node_class: int, verdict: bool) -> None:
        if len(self._verdicts) >= MAX_ENTRIES:
            self._verdicts.clear()
        self._verdicts[(specs, node_class)] = verdict
