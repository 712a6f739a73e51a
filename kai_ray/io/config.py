"""Scheduler configuration (DESIGN §5.4), validated with pydantic at load time."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kai_ray import labels as L
from kai_ray.errors import ConfigError
from kai_ray.io.documents import parse_documents, read_text
from kai_ray.io.fields import parse_duration

ActionName = Literal["allocate", "consolidation", "reclaim", "preempt", "stalegangeviction"]
DEFAULT_ACTIONS: tuple[ActionName, ...] = ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")


class PlacementStrategy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu: Literal["binpack", "spread"] = "binpack"
    cpu: Literal["binpack", "spread"] = "binpack"
    gpuDevice: Literal["pack", "spread"] | None = None  # noqa: N815 - the YAML key

    @property
    def gpu_device(self) -> Literal["pack", "spread"]:
        """KAI enables gpupack with gpu binpack and gpuspread otherwise, unless set explicitly."""
        if self.gpuDevice is not None:
            return self.gpuDevice
        return "pack" if self.gpu == "binpack" else "spread"


class SchedulerConfig(BaseModel):
    """One scheduler's settings; field names follow the YAML (KAI SchedulingShard-like)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    schedulerName: str = L.DEFAULT_SCHEDULER_NAME  # noqa: N815
    actions: tuple[ActionName, ...] = DEFAULT_ACTIONS
    placementStrategy: PlacementStrategy = Field(default_factory=PlacementStrategy)  # noqa: N815
    kValue: float = Field(default=1.0, ge=0)  # noqa: N815
    defaultStalenessGracePeriod: float = 60.0  # noqa: N815 - seconds; negative disables
    shards: int | Literal["auto"] = "auto"
    maxConsolidationPreemptees: int = Field(default=16, ge=0)  # noqa: N815
    allowConsolidatingReclaim: bool = True  # noqa: N815
    reclaimerSaturationMultiplier: float = Field(default=1.0, ge=1.0)  # noqa: N815
    maxScenariosPerJob: int = Field(default=256, ge=1)  # noqa: N815 - victim scenarios simulated per job
    maxScenariosPerAction: int = Field(default=4096, ge=1)  # noqa: N815 - ... and per action per cycle
    useSchedulingSignatures: bool = True  # noqa: N815 - KAI's pruning of repeated failed victim searches
    victimSearchBackoff: float = 120.0  # noqa: N815 - seconds; longest pause of a failing victim search (0: none)
    defaultPreemptMinRuntime: float = 0.0  # noqa: N815 - seconds
    defaultReclaimMinRuntime: float = 0.0  # noqa: N815 - seconds

    @field_validator(
        "defaultStalenessGracePeriod",
        "defaultPreemptMinRuntime",
        "defaultReclaimMinRuntime",
        "victimSearchBackoff",
        mode="before",
    )
    @classmethod
    def _duration(cls, value: Any) -> float:
        try:
            return parse_duration(value)
        except ValueError:
            raise ValueError(f"bad duration {value!r}") from None

    @field_validator("shards")
    @classmethod
    def _positive_shards(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 1:
            raise ValueError("must be at least 1")
        return value

    @property
    def effective_actions(self) -> tuple[ActionName, ...]:
        """KAI disables consolidation when either placement strategy is spread."""
        spread = "spread" in (self.placementStrategy.gpu, self.placementStrategy.cpu)
        return tuple(a for a in self.actions if not (spread and a == "consolidation"))


def config_from_mapping(data: Any, source: str = "<config>") -> SchedulerConfig:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of settings")
    try:
        return SchedulerConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(root)"
        # Our own validators already say what was wrong; pydantic's prefix only adds noise.
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "literal_error":
            message += f", got {first['input']!r}"
        raise ConfigError(f"{source}: {where}: {message}") from None


def load_config(path: str | Path | None) -> SchedulerConfig:
    if path is None:
        return SchedulerConfig()
    documents = parse_documents(read_text(path), str(path))
    if len(documents) > 1:
        raise ConfigError(f"{path}: expected one YAML document, found {len(documents)}")
    return config_from_mapping(documents[0] if documents else {}, str(path))
