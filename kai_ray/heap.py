"""Giving the C heap's free pages back to the system, now and then, in processes that live long.

A long-running scheduler process (the loop, the coordinator actor, each shard actor) makes and
drops millions of small objects. Python hands their memory back to glibc's allocator, which keeps
the freed pages inside its heaps for reuse: the process's resident memory then creeps up for
hours although what it holds does not (measured over two hours of churn, docs/performance.md).
An operator who sets a memory limit reads that creep as a leak. glibc's ``malloc_trim`` returns
the free pages; done every few minutes it costs milliseconds and keeps the resident memory close
to what is in use. Off glibc (musl, macOS) there is no such call and nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import time
from collections.abc import Callable
from functools import cache

# Often enough that free pages never pile up for long, rarely enough to cost nothing noticeable.
TRIM_EVERY_SECONDS = 300.0


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    libc = ctypes.CDLL(name)
    return getattr(libc, "malloc_trim", None)


def give_back_free_heap() -> bool:
    """The C heap's free pages go back to the system; False where the C library cannot."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


class HeapTrimmer:
    """``give_back_free_heap`` at most once every ``every`` seconds, when the owner calls
    ``maybe`` at a moment that suits it (between batches, after a loop iteration)."""

    def __init__(self, every: float = TRIM_EVERY_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.every = every
        self._clock = clock
        self._next = clock() + every
        self.trims = 0

    def maybe(self) -> None:
        now = self._clock()
        if now < self._next:
            return
        self._next = now + self.every
        if give_back_free_heap():
            self.trims += 1
