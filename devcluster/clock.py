"""Time for the dev cluster: object timestamps and the node simulator's delays.

The node simulator measures delays (start-up, run time, grace periods) in simulated seconds.
``Clock(speed=10)`` makes simulated time run ten times faster than real time, so a test can
ask for a pod that "runs for 5 s" and wait half a second. Timestamps written into objects
come from the same clock, so ``status.startTime`` plus the run time is when the pod finishes.
``ManualClock`` only moves when told, for tests that drive the simulator step by step.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta


class Clock:
    def __init__(self, speed: float = 1.0) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.speed = speed
        self._real_start = time.monotonic()
        self._wall_start = datetime.now(UTC)

    def now(self) -> float:
        """Simulated seconds since the clock started."""
        return (time.monotonic() - self._real_start) * self.speed

    def real_seconds(self, simulated: float) -> float:
        """How long to really wait for ``simulated`` seconds to pass."""
        return max(0.0, simulated) / self.speed

    def wall(self, at: float | None = None) -> datetime:
        """The simulated wall time now, or at simulated second ``at``."""
        return self._wall_start + timedelta(seconds=self.now() if at is None else at)

    def timestamp(self, at: float | None = None) -> str:
        """RFC 3339 in UTC with second precision, as metav1.Time serialises."""
        return self.wall(at).strftime("%Y-%m-%dT%H:%M:%SZ")


class ManualClock(Clock):
    """A clock that stands still until ``advance`` is called."""

    def __init__(self, start: datetime | None = None) -> None:
        super().__init__(1.0)
        self._now = 0.0
        if start is not None:
            self._wall_start = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds


def parse_timestamp(text: str) -> datetime | None:
    """Read an RFC 3339 timestamp as the API writes it; None when it is not one."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None
