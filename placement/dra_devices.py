"""Which DRA devices each node has, which claim holds each, and whether a pod's claims fit.

A ``DeviceBook`` belongs to a ``NodeTable``: per row, the devices its ResourceSlices publish
(sorted by key), and for every allocated claim the devices it holds. A device is free when
no claim holds it; a claim shared by several pods holds its devices once. Every change to a
row's devices or holders goes through the table's ``refresh`` so the row's version moves
and cached rankings look at it again.

Allocation follows the DRA allocator's rules on one node: requests in order, each taking
``count`` free devices its selectors match (``All``: every matching device, all of them free,
at least one), ``firstAvailable`` trying its alternatives in order, and a backtracking
search over choices when a later request needs a device an earlier one took. Candidates are
tried in key order, so the same state gives the same devices.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kai_ray.model import Device
from placement.dra_cel import SELECTORS
from placement.dra_demand import ClaimSpec, RequestSpec
from placement.dra_fit_classes import FREE, HELD, RELEASING, FitClasses, Layout, Taken

SEARCH_STEPS = 5_000  # choices tried per (node, pod) before the search gives up
Mask = npt.NDArray[np.bool_]
# Per claim spec: (request name, device) for each device it got.
Allocation = tuple[tuple[tuple[str, Device], ...], ...]


@dataclass(frozen=True, slots=True)
class Held:
    row: int | None  # None: devices not on a node of this table
    keys: tuple[str, ...]


class DeviceBook:
    def __init__(self, on_change: Callable[[int], None] | None = None) -> None:
        self.devices: dict[int, tuple[Device, ...]] = {}
        self.by_key: dict[str, tuple[int, Device]] = {}
        self.owner: dict[str, str] = {}  # device key -> the claim holding it
        self.claims: dict[str, Held] = {}  # claim key -> what it holds
        self.users: dict[str, set[str]] = {}  # claim key -> pods using it (sessions only)
        self.overrides: dict[str, tuple[bool, str | None]] = {}  # sessions: claims (de)allocated in them
        # sessions: devices freed by evictions, still in use until the pods go; changed only
        # with a release or take of the same devices, which make their row's class be worked out again
        self.releasing: dict[str, int] = {}
        self.payer: dict[str, str] = {}  # sessions: the pod a claim's GPUs are charged to (one per claim)
        self.claim_gpus: dict[str, float] = {}  # sessions: GPUs each claim counts toward its queue
        self.selectors = SELECTORS
        self.on_change = on_change
        # Nodes that look alike share verdicts (``dra_fit_classes``): the classes are shared with
        # every copy, each book knows its own rows' layout and, once asked, class.
        self.fit_classes = FitClasses()
        self._layout: dict[int, Layout] = {}  # row -> its devices' kinds, in key order
        self._class_of: dict[int, int] = {}  # row -> its class, until the row changes

    def __bool__(self) -> bool:
        return bool(self.devices or self.claims)

    def copy(self, on_change: Callable[[int], None] | None) -> DeviceBook:
        """An independent copy reporting changes to ``on_change`` (a session's copy of a table)."""
        out = DeviceBook(on_change)
        out.devices = dict(self.devices)
        out.by_key = dict(self.by_key)
        out.owner = dict(self.owner)
        out.claims = dict(self.claims)
        out.users = {k: set(v) for k, v in self.users.items()}
        out.overrides = dict(self.overrides)
        out.releasing = dict(self.releasing)
        out.payer = dict(self.payer)
        out.claim_gpus = dict(self.claim_gpus)
        out.selectors = self.selectors
        out.fit_classes = self.fit_classes
        out._layout = dict(self._layout)
        return out

    def _changed(self, row: int | None) -> None:
        if row is None:
            return
        self._class_of.pop(row, None)
        if self.on_change is not None:
            self.on_change(row)

    # ------------------------------------------------------------------ inventory
    def set_devices(self, row: int, devices: Sequence[Device]) -> None:
        for device in self.devices.pop(row, ()):
            self.by_key.pop(device.key, None)
        self._layout.pop(row, None)
        ordered = tuple(sorted(devices, key=lambda d: d.key))
        if ordered:
            self.devices[row] = ordered
            for device in ordered:
                self.by_key[device.key] = (row, device)
            self._layout[row] = tuple(self.fit_classes.kind(d) for d in ordered)
        self._changed(row)

    def free(self, row: int) -> list[Device]:
        return [d for d in self.devices.get(row, ()) if d.key not in self.owner]

    # ------------------------------------------------------------------ holding
    def take(self, claim: str, keys: Sequence[str], row: int | None = None) -> str:
        """``claim`` holds these devices; a problem in words when one is held by another claim
        (then nothing changes). Taking what the claim already holds is a no-op."""
        held = self.claims.get(claim)
        if held is not None and set(held.keys) == set(keys):
            return ""
        for key in keys:
            other = self.owner.get(key)
            if other is not None and other != claim:
                return f"device {key} is already allocated to claim {other}"
        if held is not None:
            self.release(claim)
        rows = {self.by_key[k][0] for k in keys if k in self.by_key}
        at = row if row is not None else (next(iter(rows)) if len(rows) == 1 else None)
        for key in keys:
            self.owner[key] = claim
        self.claims[claim] = Held(at, tuple(keys))
        self._forget_classes(keys)
        self._changed(at)
        return ""

    def release(self, claim: str) -> Held | None:
        held = self.claims.pop(claim, None)
        if held is None:
            return None
        for key in held.keys:
            if self.owner.get(key) == claim:
                del self.owner[key]
        self._forget_classes(held.keys)
        self._changed(held.row)
        return held

    def _forget_classes(self, keys: Sequence[str]) -> None:
        """The rows these devices are on change class, also where a claim spans rows (then it
        has no row of its own to report)."""
        for key in keys:
            found = self.by_key.get(key)
            if found is not None:
                self._class_of.pop(found[0], None)

    # ------------------------------------------------------------------ fitting
    def fits(self, row: int, specs: tuple[ClaimSpec, ...]) -> bool:
        node_class = self._class(row)
        return node_class is not None and self._verdict(specs, node_class, row)

    def mask(self, specs: tuple[ClaimSpec, ...], rows: npt.NDArray[np.int64], admitted: Mask) -> Mask:
        """Which of ``rows`` (with ``admitted`` already true) can allocate every claim: the
        search runs once per class of node among them, on its first row."""
        out = np.zeros(len(rows), dtype=bool)
        members: dict[int, list[int]] = {}
        for i in np.flatnonzero(admitted).tolist():
            node_class = self._class(int(rows[i]))
            if node_class is not None:
                members.setdefault(node_class, []).append(i)
        for node_class, at in members.items():
            if self._verdict(specs, node_class, int(rows[at[0]])):
                out[at] = True
        return out

    def _verdict(self, specs: tuple[ClaimSpec, ...], node_class: int, row: int) -> bool:
        verdict = self.fit_classes.verdict(specs, node_class)
        if verdict is None:
            verdict = self.allocate(row, specs) is not None
            self.fit_classes.remember(specs, node_class, verdict)
        return verdict

    def _class(self, row: int) -> int | None:
        """``row``'s class (None: no devices), computed when first asked after a change."""
        node_class = self._class_of.get(row)
        if node_class is None:
            layout = self._layout.get(row)
            if layout is None:
                return None
            node_class = self._class_of[row] = self.fit_classes.class_of(layout, self._taken(row))
        return node_class

    def _taken(self, row: int) -> Taken:
        owner, releasing = self.owner, self.releasing
        keys = [d.key for d in self.devices[row]]
        if owner.keys().isdisjoint(keys) and releasing.keys().isdisjoint(keys):
            return ()  # most nodes: nothing of theirs is taken
        return tuple(HELD if key in owner else RELEASING if key in releasing else FREE for key in keys)

    def allocate(self, row: int, specs: tuple[ClaimSpec, ...]) -> Allocation | None:
        """Devices on ``row`` for every request of every claim, or None."""
        if not specs:
            return ()
        if row not in self.devices:
            return None
        flat = [(i, request) for i, spec in enumerate(specs) for request in spec.requests]
        steps = [0]
        found = self._search(row, flat, 0, frozenset(), steps)
        if found is None:
            return None
        per_claim: list[list[tuple[str, Device]]] = [[] for _ in specs]
        for (i, _), (name, devices) in zip(flat, found, strict=True):
            per_claim[i].extend((name, d) for d in devices)
        return tuple(tuple(p) for p in per_claim)

    def _search(
        self,
        row: int,
        flat: list[tuple[int, RequestSpec]],
        at: int,
        used: frozenset[str],
        steps: list[int],
    ) -> list[tuple[str, tuple[Device, ...]]] | None:
        if at == len(flat):
            return []
        request = flat[at][1]
        for option, name in _options(request):
            for pick in self._picks(row, option, used):
                steps[0] += 1
                if steps[0] > SEARCH_STEPS:
                    return None
                rest = self._search(row, flat, at + 1, used | {d.key for d in pick}, steps)
                if rest is not None:
                    return [(name, pick), *rest]
        return None

    def _picks(self, row: int, request: RequestSpec, used: frozenset[str]) -> Iterator[tuple[Device, ...]]:
        match = self.selectors.matches
        if request.mode == "All":
            matching = [d for d in self.devices[row] if match(request.selectors, d)]
            if matching and all(d.key not in self.owner and d.key not in used for d in matching):
                yield tuple(matching)
            return
        free = [d for d in self.devices[row] if d.key not in self.owner and d.key not in used]
        candidates = [d for d in free if match(request.selectors, d)]
        if self.releasing:  # devices idle now before those an evicted pod still holds
            candidates.sort(key=lambda d: d.key in self.releasing)
        if len(candidates) >= request.count:
            yield from itertools.combinations(candidates, request.count)

    def waits(self, allocation: Allocation) -> bool:
        """Whether an allocation uses a device an evicted pod has not given back yet."""
        return bool(self.releasing) and any(d.key in self.releasing for claim in allocation for _, d in claim)

    def turned_away(self, specs: tuple[ClaimSpec, ...], rows: Mask) -> tuple[dict[str, int], Mask]:
        """Of ``rows``, those where the claims cannot be allocated, counted by reason."""
        counts: dict[str, int] = {}
        short = np.zeros(len(rows), dtype=bool)
        for row in np.flatnonzero(rows):
            if not self.fits(int(row), specs):
                why = self.shortfall(int(row), specs)
                counts[why] = counts.get(why, 0) + 1
                short[row] = True
        return counts, short

    def shortfall(self, row: int, specs: tuple[ClaimSpec, ...]) -> str:
        """Why ``specs`` do not fit on ``row``: the first claim request without enough free devices."""
        if row not in self.devices:
            return "no DRA devices"
        for spec in specs:
            for request in spec.requests:
                options = [o for o, _ in _options(request)]
                if not any(next(self._picks(row, o, frozenset()), None) is not None for o in options):
                    for option in options:
                        for expression in option.selectors:
                            error = self.selectors.error(expression)
                            if error:
                                return f"claim {spec.name}: {error}"
                    return f"no free device for claim {spec.name}, request {request.name} ({request.describe()})"
        return f"the devices of claims {', '.join(s.name for s in specs)} cannot all be allocated together"

    # ------------------------------------------------------------------ transport
    def export(self, rows: Sequence[int] | npt.NDArray[np.int64]) -> list[tuple[tuple[Device, ...], dict[str, str]]]:
        """Per row: its devices and which claim holds each held one."""
        out = []
        for row in rows:
            devices = self.devices.get(int(row), ())
            out.append((devices, {d.key: self.owner[d.key] for d in devices if d.key in self.owner}))
        return out

    def load(self, row: int, devices: tuple[Device, ...], owners: dict[str, str]) -> None:
        self.set_devices(row, devices)
        by_claim: dict[str, list[str]] = {}
        for key, claim in owners.items():
            by_claim.setdefault(claim, []).append(key)
        for claim, keys in by_claim.items():
            self.take(claim, sorted(keys), row)


def _options(request: RequestSpec) -> Iterator[tuple[RequestSpec, str]]:
    if request.alternatives:
        for option in request.alternatives:
            yield option, option.name  # already "request/subrequest"
    else:
        yield request, request.name
