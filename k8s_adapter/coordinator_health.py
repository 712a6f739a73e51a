"""Whether the loop has a coordinator that can decide: what /readyz and a leader's giving up read.

A coordinator hosted as a Ray actor can be lost (its process killed, its node gone). It is replaced
at once when Ray can start another (``CoordinatorLost.replaced``); until a cycle succeeds again the
scheduler is not ready. When none can be started for ``give_up_after`` seconds, the process gives
up: it stops, releasing its Lease if it leads, so that a standby (or its own restart) takes over
instead of a leader that holds the Lease and decides nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.failures import CoordinatorLost


@dataclass(slots=True)
class CoordinatorHealth:
    give_up_after: float = 60.0
    deciding: bool = True  # False from a loss until the next cycle that succeeds
    lost_since: float | None = None  # monotonic: since when no coordinator could be started
    losses: int = 0

    def lost(self, error: CoordinatorLost, now: float) -> None:
        self.losses += 1
        self.deciding = False
        if error.replaced:
            self.lost_since = None
        elif self.lost_since is None:
            self.lost_since = now

    def decided(self) -> None:
        self.deciding, self.lost_since = True, None

    def hopeless(self, now: float) -> bool:
        return self.lost_since is not None and now - self.lost_since > self.give_up_after
