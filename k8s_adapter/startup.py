"""How the scheduler's start went, from its process's start to its first bind, step by step.

The clock starts where the kernel started the process (``psutil``), so the interpreter and the
imports count: what a user waits for after ``kai-ray run`` is the whole of it. Each step is
marked once, the first time it ends; the loop logs the breakdown in one line when the first
bind is answered (``loadtests/scheduler_log.py`` reads it back).
"""

from __future__ import annotations

import logging
import time

import psutil

from kai_ray.logs import fields

log = logging.getLogger(__name__)

# The steps; each one's share is the time since the step that ended before it (the first cycle's
# binds leave as they are committed, so the first bind is sent before that cycle ends).
STEPS = {
    "watching": "client ready",  # interpreter, configuration, the API client: the lists are sent
    "loop": "imports",  # the loop starts: the rest imported (while the lists came), metrics set up
    "nodes": "nodes and other kinds listed",  # every watched kind but the pods
    "tables": "shard tables",  # their records read, the coordinator made and fed (the shards' tables)
    "listed": "pods listed",  # the last page of pods came (the pages before it read meanwhile)
    "decoded": "last pods read",  # the pages not read yet, into records and to the coordinator
    "sent": "first bind sent",  # the first pods/binding request left
    "cycled": "first cycle ends",  # the first cycle that bound pods returned
    "bound": "first bind answered",  # the first pods/binding request was answered
}


def process_started() -> float:
    """When this process started, wall clock (the kernel's record; now when it cannot be read)."""
    try:
        return float(psutil.Process().create_time())
    except psutil.Error:  # pragma: no cover - /proc unreadable
        return time.time()


class StartupClock:
    def __init__(self, origin: float | None = None) -> None:
        self.origin = process_started() if origin is None else origin
        self.marks: dict[str, float] = {}  # step -> seconds since the process started
        self.notes: dict[str, str] = {}  # step -> what else is worth saying about it
        self.reported = False

    def mark(self, step: str, note: str = "", at: float | None = None) -> None:
        """``step`` ended now, or at ``at`` (wall clock) when it ended before this clock existed."""
        if step not in self.marks:
            self.marks[step] = (time.time() if at is None else at) - self.origin
            if note:
                self.notes[step] = note
        if step == "bound":
            self.report()

    def report(self) -> None:
        """Log the breakdown once, when the first bind has been answered."""
        if self.reported or "bound" not in self.marks:
            return
        self.reported = True
        parts, last = [], 0.0
        for step, at in sorted(self.marks.items(), key=lambda mark: mark[1]):
            note = f" ({self.notes[step]})" if step in self.notes else ""
            parts.append(f"{STEPS.get(step, step)} {at - last:.2f}{note}")
            last = at
        total = self.marks["bound"]
        log.info(
            "first bind %.2fs after the process started: %s",
            total,
            ", ".join(parts),
            extra=fields(**{f"{step}_at": round(at, 3) for step, at in self.marks.items()}),
        )
