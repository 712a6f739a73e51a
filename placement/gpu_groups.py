"""Shared GPUs on one node: which fractions sit on which physical device.

A shared GPU is a *group* (KAI's ``runai-gpu-group``). Its usage is kept in MiB of
that node's per-device GPU memory, split by the holders' state, because KAI decides
fit and "idle vs releasing" from exactly these three sums:

- ``active``: fractions that are allocated, binding or running;
- ``releasing``: fractions whose pods are terminating;
- ``pipelined``: fractions placed onto capacity that the releasing ones will free.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class GroupUsage:
    active: int = 0
    releasing: int = 0
    pipelined: int = 0
    owns_slot: bool = False  # created by kai-ray: its reservation pod takes a pod slot

    @property
    def used(self) -> int:
        return self.active + self.releasing + self.pipelined

    @property
    def busy(self) -> bool:
        """Occupies its device now (KAI counts it out of the idle GPUs)."""
        return self.active > 0 or self.releasing > 0

    @property
    def frees_whole_device(self) -> bool:
        """Every holder is terminating and nothing waits for it: a whole GPU is on its way back."""
        return self.active == 0 and self.releasing > 0 and self.pipelined == 0

    @property
    def waits_on_releasing_device(self) -> bool:
        """Only pipelined fractions: it consumes a device that is still being released."""
        return self.active == 0 and self.releasing == 0 and self.pipelined > 0

    def room_future(self, device_mib: int) -> int | None:
        """Free MiB once releasing holders are gone, or None when it cannot take fractions
        (a fully released group is offered as a whole device instead)."""
        if self.active + self.pipelined == 0:
            return None
        return device_mib - self.active - self.pipelined

    def room_idle(self, device_mib: int) -> int | None:
        """Free MiB right now, or None when the group holds nothing allocated."""
        if self.active + self.releasing == 0:
            return None
        return device_mib - self.active - self.releasing


@dataclass(frozen=True, slots=True)
class SharedCounts:
    """Per-node counters derived from its groups, kept in the node table's arrays."""

    busy: int = 0
    frees_whole: int = 0
    waits_on_releasing: int = 0
    owned_slots_idle: int = 0  # reservation pods that exist now (fractions active or releasing)
    owned_slots_future: int = 0  # ... and once releasing fractions are gone (active or pipelined ones left)
    best_room_future: int = -1  # -1: no group can take a fraction
    best_room_idle: int = -1


def summarize(groups: dict[str, GroupUsage], device_mib: int) -> SharedCounts:
    busy = frees = waits = slots_idle = slots_future = 0
    best_future = best_idle = -1
    for usage in groups.values():
        busy += usage.busy
        frees += usage.frees_whole_device
        waits += usage.waits_on_releasing_device
        if usage.owns_slot:  # the slot follows the device: a group only pipelined has no reservation pod yet
            slots_idle += usage.busy
            slots_future += usage.active + usage.pipelined > 0
        future = usage.room_future(device_mib)
        if future is not None and future > best_future:
            best_future = future
        idle = usage.room_idle(device_mib)
        if idle is not None and idle > best_idle:
            best_idle = idle
    return SharedCounts(busy, frees, waits, slots_idle, slots_future, best_future, best_idle)
