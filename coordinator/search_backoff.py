"""Across cycles: how long a job whose victim search keeps failing waits before that action
searches for it again.

See ``coordinator.actions.search_pruning`` for why. The pause starts at ``FIRST_PAUSE``
seconds and doubles with every further failure up to the configured longest pause; a job
that is no longer pending (placed, gone) starts from scratch. Each action counts on its own:
consolidation or preempt finding nothing for a job says nothing of what reclaim would find.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

FIRST_PAUSE = 10.0
Search = tuple[str, str]  # (job key, action name)


class SearchBackoff:
    def __init__(self, longest_pause: float) -> None:
        self.longest_pause = longest_pause
        self._failures: dict[Search, tuple[int, float]] = {}  # (job, action) -> (failures in a row, not before)
        self._reasons: dict[Search, str] = {}  # (job, action) -> what its last search said

    def pauses(self) -> list[float]:
        """When each pause ends."""
        return [until for _, until in self._failures.values()]

    def paused(self, now: float) -> frozenset[Search]:
        """The (job, action) searches paused at ``now``."""
        return frozenset(search for search, (_, until) in self._failures.items() if until > now)

    def reasons(self, searches: Iterable[Search]) -> dict[str, dict[str, str]]:
        """What the last real search of each of ``searches`` said, per job (action -> reason), for
        those it said something."""
        out: dict[str, dict[str, str]] = {}
        for search in searches:
            if search in self._reasons:
                job, action = search
                out.setdefault(job, {})[action] = self._reasons[search]
        return out

    def record(
        self,
        now: float,
        failed: Iterable[Search],
        pending: set[str],
        reasons: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        """After a session: the ``failed`` (job, action) searches found nothing (``reasons``: what
        each job's searches said, per action); only ``pending`` jobs keep a count."""
        if self.longest_pause <= 0:
            return
        for search in [s for s in self._failures if s[0] not in pending]:
            del self._failures[search]
            self._reasons.pop(search, None)
        for search in failed:
            job, action = search
            count = self._failures.get(search, (0, 0.0))[0] + 1
            pause = min(self.longest_pause, FIRST_PAUSE * 2 ** (count - 1))
            self._failures[search] = (count, now + pause)
            said = (reasons or {}).get(job, {}).get(action)
            if said is None:
                self._reasons.pop(search, None)
            else:
                self._reasons[search] = said
