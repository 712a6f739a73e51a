"""Across cycles: how long a job whose victim search keeps failing waits before the next one.

See ``coordinator.actions.search_pruning`` for why. The pause starts at ``FIRST_PAUSE``
seconds and doubles with every further failure up to the configured longest pause; a job
that is no longer pending (placed, gone) starts from scratch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

FIRST_PAUSE = 10.0


class SearchBackoff:
    def __init__(self, longest_pause: float) -> None:
        self.longest_pause = longest_pause
        self._failures: dict[str, tuple[int, float]] = {}  # job -> (failures in a row, not before)
        self._reasons: dict[str, dict[str, str]] = {}  # job -> what its last search said, per action

    def pauses(self) -> list[float]:
        """When each pause ends."""
        return [until for _, until in self._failures.values()]

    def paused(self, now: float) -> frozenset[str]:
        return frozenset(job for job, (_, until) in self._failures.items() if until > now)

    def reasons(self, jobs: Iterable[str]) -> dict[str, dict[str, str]]:
        """What the last real search of each of ``jobs`` said (action -> reason), for those it said something."""
        return {job: dict(self._reasons[job]) for job in jobs if job in self._reasons}

    def record(
        self,
        now: float,
        failed: Iterable[str],
        pending: set[str],
        reasons: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        """After a session: ``failed`` searched without success (``reasons``: what each search said,
        per action); only ``pending`` jobs keep a count."""
        if self.longest_pause <= 0:
            return
        for job in [j for j in self._failures if j not in pending]:
            del self._failures[job]
            self._reasons.pop(job, None)
        for job in failed:
            count = self._failures.get(job, (0, 0.0))[0] + 1
            pause = min(self.longest_pause, FIRST_PAUSE * 2 ** (count - 1))
            self._failures[job] = (count, now + pause)
            self._reasons[job] = dict((reasons or {}).get(job, {}))
