"""What a cycle hands back: decisions, bind and evict intents, and how it went."""

from __future__ import annotations

from dataclasses import dataclass, field

from coordinator.decisions import Decisions


@dataclass(frozen=True, slots=True)
class BindIntent:
    pod: str
    node: str
    gpu_groups: tuple[str, ...]
    reservation: str


@dataclass(frozen=True, slots=True)
class EvictIntent:
    pod: str
    action: str
    preemptor: str | None


@dataclass(slots=True)
class CycleStats:
    seconds: float = 0.0
    session_seconds: float = 0.0
    candidate_nodes: int = 0  # rows the session's table held (0 while the shards placed)
    full_table: bool = False
    commit_seconds: float = 0.0  # committing the binds across shards
    prepared_jobs: int = 0  # jobs to bind this cycle
    aborted_jobs: int = 0  # ... of which some shard refused part
    shard_calls: int = 0
    place_rounds: int = 0  # rounds in which the shards placed pods
    reused: bool = False  # nothing had changed: the last cycle's decisions, no session run


@dataclass(slots=True)
class CycleResult:
    decisions: Decisions
    binds: list[BindIntent] = field(default_factory=list)
    evictions: list[EvictIntent] = field(default_factory=list)
    stats: CycleStats = field(default_factory=CycleStats)
    pod_queues: dict[str, str] = field(default_factory=dict)  # pod -> leaf queue, for pods of pod groups
    refused: dict[str, str] = field(default_factory=dict)  # job -> why a shard refused its binds
