"""Per leaf queue, the sum of its jobs' contributions (requests, allocations), kept as rows.

Each job's contribution is one row of its queue's array; a job that goes leaves a row of zeros
that the next job of that queue reuses. A queue's total is one numpy sum over its array, so
adding a job to a queue of 16,000 costs a row and a sum in C, not a walk over its jobs in
Python, and the total is always the sum of what is there now: no running total to drift.
"""

from __future__ import annotations

import numpy as np

WIDTH = 9  # request, allocated and allocated non-preemptible; GPU, CPU, memory each


class QueueTotals:
    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self._rows: dict[str, np.ndarray] = {}  # queue -> its rows (some free, all zero)
        self._used: dict[str, int] = {}  # queue -> rows handed out so far
        self._free: dict[str, list[int]] = {}  # queue -> rows given back
        self._slot: dict[str, tuple[str, int]] = {}  # job -> its queue and row
        self._totals: dict[str, np.ndarray] = {}  # queue -> its sum, while no row changed

    def __contains__(self, job: str) -> bool:
        return job in self._slot

    def put(self, queue: str, job: str, contribution: tuple[float, ...]) -> None:
        """The job's row, in its queue (a job already here is moved, its row replaced)."""
        self.remove(job)
        free = self._free.get(queue)
        if free:
            row = free.pop()
        else:
            row = self._used.get(queue, 0)
            self._used[queue] = row + 1
            rows = self._rows.get(queue)
            if rows is None or row >= len(rows):
                grown = np.zeros((max(8, 2 * row), WIDTH))
                if rows is not None:
                    grown[: len(rows)] = rows
                self._rows[queue] = grown
        self._rows[queue][row] = contribution
        self._slot[job] = (queue, row)
        self._totals.pop(queue, None)

    def remove(self, job: str) -> None:
        slot = self._slot.pop(job, None)
        if slot is None:
            return
        queue, row = slot
        self._rows[queue][row] = 0.0
        self._free.setdefault(queue, []).append(row)
        self._totals.pop(queue, None)
        if len(self._free[queue]) == self._used[queue]:  # the queue has no job left
            for kept in (self._rows, self._used, self._free):
                del kept[queue]

    def contributions(self) -> dict[str, tuple[str, tuple[float, ...]]]:
        """Job -> its queue and its row as kept (for checks that compare with a fresh count)."""
        return {job: (queue, tuple(self._rows[queue][row].tolist())) for job, (queue, row) in self._slot.items()}

    def totals(self) -> dict[str, np.ndarray]:
        """Queue -> the sum of its jobs' rows."""
        for queue, rows in self._rows.items():
            if queue not in self._totals:
                self._totals[queue] = rows[: self._used[queue]].sum(axis=0)
        return self._totals
