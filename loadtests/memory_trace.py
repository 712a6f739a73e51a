"""Where a long run's own process keeps memory: tracemalloc snapshots and live objects by type.

Resident memory alone cannot tell a structure that grows from allocator fragmentation or a
warm-up: each ``take`` records the process's resident memory beside what Python itself holds
(tracemalloc's traced total, what glibc's malloc has handed out) and how many objects of each
type are alive. ``report`` compares the first snapshot with the last: the allocation sites whose
memory grew, split into the load driver's (allocated under one of its functions) and the rest
(the scheduler loop's, which shares the process), and the types whose count grew.
"""

from __future__ import annotations

import ctypes
import gc
import inspect
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from kai_ray.heap import c_library_function, give_back_free_heap

# Each traced allocation records this many frames: twelve slowed the run's process more than tenfold.
FRAMES = 6


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _malloc_mib() -> tuple[float, float] | None:
    """glibc's malloc: MiB handed out and MiB free inside its heaps (None off glibc)."""
    mallinfo2 = c_library_function("mallinfo2")
    if mallinfo2 is None:
        return None
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    return (info.uordblks + info.hblkhd) / 2**20, info.fordblks / 2**20


@dataclass
class Snapshot:
    minute: float
    rss_mib: float
    traced_mib: float
    malloc_mib: tuple[float, float] | None
    objects: Counter[str]
    path: Path  # the tracemalloc snapshot, on disk: kept in memory it would be the largest thing here


@dataclass
class MemoryTrace:
    every_seconds: float
    driver: Sequence[Callable[..., Any]] = ()  # the load driver's functions
    started: float = field(default_factory=time.monotonic)
    snapshots: list[Snapshot] = field(default_factory=list)
    directory: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="memory-trace-")))

    def start(self) -> None:
        """Trace from now on: what was allocated before (imports, Ray's start) is not traced, and
        what is still traced at the end was allocated since and is still alive."""
        tracemalloc.start(FRAMES)

    def take(self) -> Snapshot:
        gc.collect()  # what is left is alive, not garbage waiting for a collection
        objects = Counter(type(o).__qualname__ for o in gc.get_objects())
        path = self.directory / f"{len(self.snapshots)}.tracemalloc"
        tracemalloc.take_snapshot().dump(str(path))
        snapshot = Snapshot(
            (time.monotonic() - self.started) / 60,
            psutil.Process().memory_info().rss / 2**20,
            tracemalloc.get_traced_memory()[0] / 2**20,
            _malloc_mib(),
            objects,
            path,
        )
        self.snapshots.append(snapshot)
        return snapshot

    @staticmethod
    def line(snapshot: Snapshot) -> str:
        malloc = snapshot.malloc_mib
        in_malloc = "" if malloc is None else f", malloc in use {malloc[0]:.1f} free {malloc[1]:.1f}"
        return (
            f"trace at {snapshot.minute:.1f} min: rss {snapshot.rss_mib:.1f} MiB, traced {snapshot.traced_mib:.1f}"
            f"{in_malloc}, {sum(snapshot.objects.values()):,} objects"
        )

    def report(self, top: int = 25) -> str:
        if len(self.snapshots) < 2:
            return "trace: fewer than two snapshots, nothing to compare"
        first, last = self.snapshots[0], self.snapshots[-1]
        ignore = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, __file__)]
        before = tracemalloc.Snapshot.load(str(first.path)).filter_traces(ignore)
        after = tracemalloc.Snapshot.load(str(last.path)).filter_traces(ignore)
        lines = [self.line(s) for s in self.snapshots]
        lines.append(f"between minute {first.minute:.1f} and {last.minute:.1f}:")
        driver_lines = _line_ranges(self.driver)
        by_stack = after.compare_to(before, "traceback")
        driver = sum(s.size_diff for s in by_stack if _within(s.traceback, driver_lines))
        rest = sum(s.size_diff for s in by_stack) - driver
        lines.append(f"traced growth: driver {driver / 2**20:+.2f} MiB, loop and the rest {rest / 2**20:+.2f} MiB")
        lines.append("allocation sites that grew most (file:line, KiB, blocks):")
        for stat in after.compare_to(before, "lineno")[:top]:
            frame = stat.traceback[0]
            lines.append(f"  {frame.filename}:{frame.lineno} {stat.size_diff / 1024:+.1f} {stat.count_diff:+d}")
        lines.append("stacks that grew most (innermost last):")
        for stat in by_stack[: top // 2]:
            owner = "driver" if _within(stat.traceback, driver_lines) else "loop"
            lines.append(f"  {owner} {stat.size_diff / 1024:+.1f} KiB {stat.count_diff:+d} blocks")
            lines.extend(f"    {f.filename}:{f.lineno}" for f in stat.traceback)
        grown = (last.objects - first.objects).most_common(top)
        lines.append("types with more live objects: " + ", ".join(f"{name} {count:+,}" for name, count in grown))
        return "\n".join(lines)


def _line_ranges(functions: Sequence[Callable[..., Any]]) -> list[tuple[str, int, int]]:
    ranges = []
    for function in functions:
        source, first = inspect.getsourcelines(function)
        ranges.append((inspect.getfile(function), first, first + len(source) - 1))
    return ranges


def _within(traceback: tracemalloc.Traceback, ranges: list[tuple[str, int, int]]) -> bool:
    return any(f.filename == path and first <= f.lineno <= last for f in traceback for path, first, last in ranges)


def trim_heap() -> float:
    """Give the C allocator's free pages back to the system (glibc's ``malloc_trim``); the MiB
    this process's resident memory went down by (0 where there is no glibc)."""
    me = psutil.Process()
    before = me.memory_info().rss
    if not give_back_free_heap():
        return 0.0
    return float(before - me.memory_info().rss) / 2**20
