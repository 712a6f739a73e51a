"""How a call to the coordinator can fail as a whole: what its callers catch. Apart from the
coordinator itself, so that the adapter can name them without importing the scheduling code."""

from __future__ import annotations


class ShardsFailed(RuntimeError):
    """Shards went down during a cycle. They were replaced and rebuilt from the model, and every
    reservation of the cycle was undone: nothing of it is bound. The next cycle schedules again."""

    def __init__(self, message: str, shards: frozenset[int], phase: str) -> None:
        super().__init__(message)
        self.shards = shards
        self.phase = phase


class CoordinatorLost(RuntimeError):
    """The coordinator went away with the call (its actor's process died). Nothing of the call
    took effect that its caller has not seen. ``replaced``: a new coordinator, rebuilt from what
    the caller told the lost one, decides from the next call; False: none could be started, and
    the next call tries again."""

    def __init__(self, message: str, replaced: bool) -> None:
        super().__init__(message)
        self.replaced = replaced
