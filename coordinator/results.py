"""What a cycle hands back: decisions, bind and evict intents, and how it went."""

from __future__ import annotations

from dataclasses import dataclass, field

from coordinator.decisions import Decisions
from coordinator.dra_session import ClaimGrant
from coordinator.job_timers import JobClock


@dataclass(frozen=True, slots=True)
class BindIntent:
    pod: str
    node: str
    gpu_groups: tuple[str, ...]
    reservation: str
    claims: tuple[ClaimGrant, ...] = ()  # DRA claims the bind allocates (written before binding)


@dataclass(frozen=True, slots=True)
class EvictIntent:
    pod: str
    action: str
    preemptor: str | None


@dataclass(slots=True)
class CycleStats:
    seconds: float = 0.0
    open_seconds: float = 0.0  # the session opened (KAI's open session)
    session_seconds: float = 0.0
    close_seconds: float = 0.0  # decisions collected, binds committed (KAI's close session)
    action_seconds: dict[str, float] = field(default_factory=dict)  # per action, in the order they ran
    candidate_nodes: int = 0  # rows the session's table held (0 while the shards placed)
    full_table: bool = False
    commit_seconds: float = 0.0  # committing the binds across shards
    prepared_jobs: int = 0  # jobs to bind this cycle
    aborted_jobs: int = 0  # ... of which some shard refused part
    shard_calls: int = 0
    place_rounds: int = 0  # rounds in which the shards placed pods
    reused: bool = False  # nothing had changed: the last cycle's decisions, no session run
    cut_short: bool = False  # victim searches stopped at the time budget: the next cycle goes on with them
    failed_actions: dict[str, str] = field(default_factory=dict)  # action -> the error that stopped it


@dataclass(slots=True)
class CycleResult:
    decisions: Decisions
    binds: list[BindIntent] = field(default_factory=list)
    streamed: int = 0  # the first binds, handed to the coordinator's bind sink as they were committed
    evictions: list[EvictIntent] = field(default_factory=list)
    stats: CycleStats = field(default_factory=CycleStats)
    pod_queues: dict[str, str] = field(default_factory=dict)  # pod -> leaf queue, for pods of pod groups
    pod_jobs: dict[str, str] = field(default_factory=dict)  # each of our pods -> its pod group ('' if missing)
    not_ready_jobs: frozenset[str] = frozenset()  # gangs whose pods are not all created yet (never tried)
    search_skipped: dict[str, str] = field(default_factory=dict)  # job -> why no victim search ran for it
    paused_jobs: frozenset[str] = frozenset()  # jobs with an action's victim search waiting out a backoff
    refused: dict[str, str] = field(default_factory=dict)  # job -> why a shard refused its binds
    job_clocks: dict[str, JobClock] = field(default_factory=dict)  # pod groups whose timestamps changed
    ungates: list[str] = field(default_factory=list)  # gated pods whose queue has room: remove kai-ray's gate
    # Our pods held by a scheduling gate (never in ``pod_jobs``): by (queue, gate state) and by pod group.
    gated_by_queue: dict[tuple[str, str], int] = field(default_factory=dict)
    gated_by_group: dict[str, int] = field(default_factory=dict)
