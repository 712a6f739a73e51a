"""The coordinator: the queue tree and fair share, job order, KAI's actions in a session, and the
gang commit across shards.

``__all__`` is what the wiring, the adapter and the benchmarks may use; import it from here or
from the module that defines it. ``coordinator.fairshare`` has its own public names.
"""

from coordinator.coordinator import Coordinator
from coordinator.decisions import Decisions, PodDecision
from coordinator.dra_session import ClaimGrant, DraView
from coordinator.failures import CoordinatorLost, ShardsFailed
from coordinator.job_timers import JobClock
from coordinator.replaceable import CoordinatorHost, HostGone, HostLink, ReplaceableCoordinator
from coordinator.result_changes import ResultChange, ResultReceiver, ResultSender
from coordinator.results import BindIntent, CycleResult, CycleStats, EvictIntent
from coordinator.scheduler import run_session
from coordinator.semi_preemptible import protected_pods
from coordinator.session import SessionState
from coordinator.shard_client import Answers, InProcessTransport, ShardClient, ShardTransport
from coordinator.shard_set import ShardSet
from coordinator.statement import Statement

__all__ = [
    "BindIntent",
    "ClaimGrant",
    "DraView",
    "Answers",
    "Coordinator",
    "CoordinatorHost",
    "CoordinatorLost",
    "HostGone",
    "HostLink",
    "CycleResult",
    "CycleStats",
    "Decisions",
    "EvictIntent",
    "InProcessTransport",
    "JobClock",
    "PodDecision",
    "ReplaceableCoordinator",
    "ResultChange",
    "ResultReceiver",
    "ResultSender",
    "ShardClient",
    "ShardSet",
    "ShardTransport",
    "ShardsFailed",
    "SessionState",
    "Statement",
    "protected_pods",
    "run_session",
]
