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
from typing import Any

# Often enough that free pages never pile up for long, rarely enough to cost nothing noticeable.
TRIM_EVERY_SECONDS = 300.0


@cache
def c_library_function(name: str) -> Any | None:
    """A function of the C library (``malloc_trim``, ``mallinfo2``: glibc's malloc extras), or
    None where the library has no such function."""
    library = ctypes.util.find_library("c")
    return getattr(ctypes.CDLL(library), name, None) if library else None


def give_back_free_heap() -> bool:
    """The C heap's free pages go back to the system; False where the C library cannot."""
    trim = c_library_function("malloc_trim")
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
