"""The coordinator: the queue tree and fair share, job order, KAI's actions in a session, and the
gang commit across shards.

``__all__`` is what the wiring, the adapter and the benchmarks may use; import it from here or
from the module that defines it. ``coordinator.fairshare`` has its own public names.
"""

from coordinator.coordinator import BindIntent, Coordinator, CycleResult, CycleStats, EvictIntent
from coordinator.decisions import Decisions, PodDecision
from coordinator.dra_session import ClaimGrant, DraView
from coordinator.job_timers import JobClock
from coordinator.scheduler import run_session
from coordinator.shard_set import Call, InProcessShards, ShardBackend, ShardSet

__all__ = [
    "BindIntent",
    "ClaimGrant",
    "DraView",
    "Call",
    "Coordinator",
    "CycleResult",
    "CycleStats",
    "Decisions",
    "EvictIntent",
    "InProcessShards",
    "JobClock",
    "PodDecision",
    "ShardBackend",
    "ShardSet",
    "run_session",
]
