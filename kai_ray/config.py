"""The scheduler configuration schema (docs/architecture.md, "Scheduler config"), validated by pydantic.

The reader that turns a YAML file into this object is ``kai_ray.io.config``; the schema lives at
the bottom layer so that the shards and the coordinator can take it without importing readers.
"""

from __future__ import annotations

from datetime import datetime
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kai_ray import labels as L
from kai_ray import plugins as P
from kai_ray.quantity import parse_duration

ActionName = Literal["allocate", "consolidation", "reclaim", "preempt", "stalegangeviction", "runtimelimit"]
DEFAULT_ACTIONS: tuple[ActionName, ...] = ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")


class PlacementStrategy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    gpu: Literal["binpack", "spread"] = "binpack"
    cpu: Literal["binpack", "spread"] = "binpack"
    gpuDevice: Literal["pack", "spread"] | None = None  # noqa: N815 - the YAML key

    @property
    def gpu_device(self) -> Literal["pack", "spread"]:
        """KAI enables gpupack with gpu binpack and gpuspread otherwise, unless set explicitly."""
        if self.gpuDevice is not None:
            return self.gpuDevice
        return "pack" if self.gpu == "binpack" else "spread"


def _seconds(value: Any) -> float:
    try:
        return parse_duration(value)
    except ValueError:
        raise ValueError(f"bad duration {value!r}") from None


def _non_negative(value: Any) -> float:
    seconds = _seconds(value)
    if seconds < 0:
        raise ValueError(f"must not be negative, got {value!r}")
    return seconds


def _positive(seconds: float) -> float:
    if seconds <= 0:
        raise ValueError("must be positive")
    return seconds


# Prometheus-style durations for usage windows ("1w", "30d", "12h"), as KAI's usageParams take them.
_PROM_UNITS: tuple[tuple[str, float], ...] = (
    ("ms", 1e-3),
    ("y", 365 * 86400.0),
    ("w", 7 * 86400.0),
    ("d", 86400.0),
    ("h", 3600.0),
    ("m", 60.0),
    ("s", 1.0),
)


def parse_window(value: Any) -> float:
    """A Prometheus duration (``1w``, ``2d12h``, ``90m``) or a number of seconds, in seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str) or not value:
        raise ValueError(f"bad duration {value!r}")
    total, rest = 0.0, value
    while rest:
        digits = len(rest) - len(rest.lstrip("0123456789."))
        unit = next((u for u in _PROM_UNITS if rest.startswith(u[0], digits)), None)
        if digits == 0 or unit is None:
            raise ValueError(f"bad duration {value!r}")
        total += float(rest[:digits]) * unit[1]
        rest = rest[digits + len(unit[0]) :]
    return total


# Client-specific ``usageParams.extraParams`` each usage source understands (anything else is an error).
PROMETHEUS_EXTRA_PARAMS = {
    "usageQueryTimeout": "10s",
    "queryResolution": "1m",
    "gpuAllocationMetric": "kai_queue_allocated_gpus",
    "cpuAllocationMetric": "kai_queue_allocated_cpu_cores",
    "memoryAllocationMetric": "kai_queue_allocated_memory_bytes",
    "gpuCapacityMetric": 'sum(kube_node_status_capacity{resource="nvidia_com_gpu"})',
    "cpuCapacityMetric": 'sum(kube_node_status_capacity{resource="cpu"})',
    "memoryCapacityMetric": 'sum(kube_node_status_capacity{resource="memory"})',
}
ACCOUNTING_EXTRA_PARAMS = {
    "resolution": "",  # width of one accounting bucket; default: the window / 512, at least 1m
}


class UsageParams(BaseModel):
    """KAI's ``usageDBConfig.usageParams``: which past usage counts, and how much."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    windowSize: float = 7 * 86400.0  # noqa: N815 - seconds (Prometheus duration in YAML)
    windowType: Literal["sliding", "tumbling"] = "sliding"  # noqa: N815
    tumblingWindowStartTime: float | None = None  # noqa: N815 - epoch seconds (RFC 3339 in YAML)
    halfLifePeriod: float = 0.0  # noqa: N815 - seconds; 0 = no decay
    fetchInterval: float = 60.0  # noqa: N815 - seconds between usage refreshes
    stalenessPeriod: float = 300.0  # noqa: N815 - usage older than this is not used
    extraParams: dict[str, str] = Field(default_factory=dict)  # noqa: N815

    @field_validator("windowSize", mode="before")
    @classmethod
    def _window(cls, value: Any) -> float:
        return _positive(parse_window(value))

    @field_validator("windowType", mode="before")
    @classmethod
    def _no_cron(cls, value: Any) -> Any:
        if value == "cron":
            raise ValueError("cron windows are not supported by kai-ray; use sliding or tumbling")
        return value

    @field_validator("halfLifePeriod", "fetchInterval", "stalenessPeriod", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> float:
        if value in (None, ""):
            return 0.0
        return max(_seconds(value), 0.0)  # KAI: a non-positive half-life turns decay off

    @field_validator("tumblingWindowStartTime", mode="before")
    @classmethod
    def _timestamp(cls, value: Any) -> float | None:
        if value is None or isinstance(value, int | float):
            return value
        if isinstance(value, datetime):
            return value.timestamp()
        try:
            return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise ValueError(f"bad RFC 3339 time {value!r}") from None

    def extra(self, key: str, default: str) -> str:
        return self.extraParams.get(key) or default


class UsageDBConfig(BaseModel):
    """KAI's ``usageDBConfig``: where time-based fair share takes past usage from.

    ``clientType: accounting`` is kai-ray's own (allocations integrated every cycle, kept on
    the Queues' status); ``prometheus`` queries a Prometheus server as KAI does."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    clientType: Literal["accounting", "prometheus"]  # noqa: N815
    connectionString: str = ""  # noqa: N815 - the Prometheus base URL
    usageParams: UsageParams = Field(default_factory=UsageParams)  # noqa: N815

    @model_validator(mode="after")
    def _known_extras(self) -> UsageDBConfig:
        known = PROMETHEUS_EXTRA_PARAMS if self.clientType == "prometheus" else ACCOUNTING_EXTRA_PARAMS
        for key, value in self.usageParams.extraParams.items():
            if key not in known:
                raise ValueError(f"usageParams.extraParams.{key}: not a parameter of clientType {self.clientType}")
            if key in ("usageQueryTimeout", "queryResolution", "resolution"):
                _seconds(value)
        if self.clientType == "prometheus" and not self.connectionString:
            raise ValueError("connectionString: the Prometheus URL is required with clientType prometheus")
        if self.usageParams.windowType == "tumbling" and self.usageParams.tumblingWindowStartTime is None:
            raise ValueError("usageParams.tumblingWindowStartTime: required with windowType tumbling")
        return self


class JobAging(BaseModel):
    """Beyond KAI (its issue #1970): a pending job gains one priority step per ``interval`` it
    has waited, at most ``maxBoost``, for its order in its queue and for preempt."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    interval: float  # seconds of waiting per step
    maxBoost: int = Field(default=10, ge=1)  # noqa: N815

    @field_validator("interval", mode="before")
    @classmethod
    def _interval(cls, value: Any) -> float:
        return _positive(_seconds(value))


class Reservation(BaseModel):
    """Beyond KAI: a gang that has waited ``after`` reserves the nodes it will run on; other jobs
    may use them only if their expected runtime ends before the gang's projected start
    (docs/reservation-backfill.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    after: float  # seconds a gang waits before it reserves; a PodGroup's annotation may override it
    minPods: int = Field(default=2, ge=2)  # noqa: N815 - the smallest gang minimum that reserves

    @field_validator("after", mode="before")
    @classmethod
    def _after(cls, value: Any) -> float:
        return _non_negative(value)


class QueueAdmissionGating(BaseModel):
    """KAI's ``spec.global.queueAdmissionGating``: how long a pod whose gate kai-ray removed keeps
    its room booked in its queue while it is still pending (docs/admission-gating.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    reservationTimeout: float = 600.0  # noqa: N815 - seconds (the design names no default)

    @field_validator("reservationTimeout", mode="before")
    @classmethod
    def _timeout(cls, value: Any) -> float:
        return _non_negative(value)


class PluginConfig(BaseModel):
    """A SchedulingShard's override of one KAI plugin (``kai_ray.plugins`` resolves them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool | None = None
    priority: int | None = None
    arguments: dict[str, str] | None = None


LIVE_SESSION_BUDGET = 1.0  # seconds: sessionTimeBudget of `kai-ray run` and `up` when the config sets none
# Seconds: the slowest round measured at 50,000 nodes (every row of a shard) takes under a second,
# a frozen Ray node is found dead by Ray itself only after about a minute.
DEFAULT_SHARD_ROUND_TIMEOUT = 10.0


class SchedulerConfig(BaseModel):
    """One scheduler's settings; field names follow the YAML (KAI SchedulingShard-like)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False)

    schedulerName: str = L.DEFAULT_SCHEDULER_NAME  # noqa: N815
    actions: tuple[ActionName, ...] = DEFAULT_ACTIONS
    placementStrategy: PlacementStrategy = Field(default_factory=PlacementStrategy)  # noqa: N815
    kValue: float = Field(default=1.0, ge=0)  # noqa: N815
    defaultStalenessGracePeriod: float = 60.0  # noqa: N815 - seconds; negative disables
    shards: int | Literal["auto"] = "auto"
    maxConsolidationPreemptees: int = Field(default=16, ge=0)  # noqa: N815
    allowConsolidatingReclaim: bool = True  # noqa: N815
    reclaimerSaturationMultiplier: float = Field(default=1.0, ge=1.0)  # noqa: N815
    maxScenariosPerJob: int = Field(default=256, ge=1)  # noqa: N815 - victim scenarios per step of a job's search
    maxScenariosPerAction: int = Field(default=4096, ge=1)  # noqa: N815 - ... and per action per cycle
    useSchedulingSignatures: bool = True  # noqa: N815 - KAI's pruning of repeated failed victim searches
    victimSearchBackoff: float = 120.0  # noqa: N815 - seconds; longest pause of a failing victim search (0: none)
    # Seconds a cycle may spend before its victim searches stop taking new jobs (the rest wait for
    # the next cycle, in the same fair order); None: 1 s in `kai-ray run`, no limit elsewhere, so
    # that `schedule` and `simulate` decide the same whatever the machine's speed. 0: no limit.
    sessionTimeBudget: float | None = None  # noqa: N815
    defaultPreemptMinRuntime: float = 0.0  # noqa: N815 - seconds
    defaultReclaimMinRuntime: float = 0.0  # noqa: N815 - seconds
    reclaimResolveMethod: Literal["lca", "queue"] = "lca"  # noqa: N815 - which queue's reclaimMinRuntime applies
    usageDBConfig: UsageDBConfig | None = None  # noqa: N815 - time-based fair share; None = no usage
    jobAging: JobAging | None = None  # noqa: N815 - None = off (KAI's order)
    expectedRuntimeExceeded: Literal["ignore", "preemptFirst", "stop"] = "ignore"  # noqa: N815
    reservation: Reservation | None = None  # None = off: no gang reserves nodes (KAI's behaviour)
    queueAdmissionGating: QueueAdmissionGating = QueueAdmissionGating()  # noqa: N815
    plugins: dict[str, PluginConfig] = Field(default_factory=dict)  # KAI's plugins: on/off and order
    # KAI's --mig-worker-node-label-key: the node label whose boolean value says whether a node is
    # MIG-enabled (without it, a node is MIG-enabled when it offers MIG profiles).
    migWorkerNodeLabelKey: str = L.MIG_ENABLED_NODE_LABEL  # noqa: N815
    # Seconds a round waits for a shard actor's answer before taking it for lost and rebuilding it
    # elsewhere (``kai_ray.app.actors.RayTransport``, which also grants batches that load a table
    # and new actors more); 0: wait as long as Ray does. In-process shards never wait.
    shardRoundTimeout: float = DEFAULT_SHARD_ROUND_TIMEOUT  # noqa: N815

    @field_validator("migWorkerNodeLabelKey")
    @classmethod
    def _label_key(cls, value: str) -> str:
        if not L.is_label_key(value):
            raise ValueError(f"must be a node label key, got {value!r}")
        return value

    @field_validator("plugins")
    @classmethod
    def _known_plugins(cls, value: dict[str, PluginConfig]) -> dict[str, PluginConfig]:
        unknown = sorted(name for name in value if not P.known(name))
        if unknown:
            raise ValueError(f"unknown plugin {unknown[0]!r} (kai-ray has: {', '.join(sorted(P.DEFAULT_PRIORITIES))})")
        return value

    @cached_property
    def resolved_plugins(self) -> P.ResolvedPlugins:
        """The enabled plugins in KAI's order, and the warnings for what kai-ray does not honour."""
        return P.resolve(self.plugins, self.placementStrategy.gpu == "binpack")

    @field_validator("defaultStalenessGracePeriod", mode="before")
    @classmethod
    def _grace(cls, value: Any) -> float:
        """A negative grace period means 'never evict a stale gang', as KAI's flag says."""
        return _seconds(value)

    def for_live_loop(self) -> SchedulerConfig:
        """The settings a live scheduler (`run`, `up`) runs with: cycles bounded in time unless the
        config says otherwise (``sessionTimeBudget``)."""
        if self.sessionTimeBudget is not None:
            return self
        return self.model_copy(update={"sessionTimeBudget": LIVE_SESSION_BUDGET})

    @field_validator("sessionTimeBudget", mode="before")
    @classmethod
    def _budget(cls, value: Any) -> float | None:
        if value is None:
            return None
        seconds = _seconds(value)
        if seconds < 0:
            raise ValueError(f"must not be negative, got {value!r}")
        return seconds

    @field_validator(
        "defaultPreemptMinRuntime",
        "defaultReclaimMinRuntime",
        "victimSearchBackoff",
        "shardRoundTimeout",
        mode="before",
    )
    @classmethod
    def _non_negative_duration(cls, value: Any) -> float:
        return _non_negative(value)

    @field_validator("shards")
    @classmethod
    def _positive_shards(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 1:
            raise ValueError("must be at least 1")
        return value

    @property
    def shard_round_timeout(self) -> float | None:
        """``shardRoundTimeout``, None for no limit."""
        return self.shardRoundTimeout or None

    @property
    def effective_actions(self) -> tuple[ActionName, ...]:
        """KAI disables consolidation when either placement strategy is spread; stopping jobs past
        their expected runtime adds the ``runtimelimit`` step at the end unless it is listed."""
        spread = "spread" in (self.placementStrategy.gpu, self.placementStrategy.cpu)
        actions = tuple(a for a in self.actions if not (spread and a == "consolidation"))
        if self.expectedRuntimeExceeded == "stop" and "runtimelimit" not in actions:
            actions += ("runtimelimit",)
        return actions
