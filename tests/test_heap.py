"""Long-lived processes give their allocator's free pages back now and then (``kai_ray.heap``)."""

from __future__ import annotations

import platform

import pytest

from kai_ray import heap
from kai_ray.heap import HeapTrimmer, give_back_free_heap


def test_free_pages_go_back_where_the_c_library_is_glibc() -> None:
    assert give_back_free_heap() == (platform.libc_ver()[0] == "glibc")


def test_a_trimmer_gives_back_at_most_once_per_period(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []
    now = [1000.0]

    def give_back() -> bool:
        calls.append(now[0])
        return True

    monkeypatch.setattr(heap, "give_back_free_heap", give_back)
    trimmer = HeapTrimmer(every=300.0, clock=lambda: now[0])
    for step in range(0, 1000, 10):  # an iteration every 10 s for 1,000 s
        now[0] = 1000.0 + step
        trimmer.maybe()
    assert calls == [1300.0, 1600.0, 1900.0] and trimmer.trims == 3
