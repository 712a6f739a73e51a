"""The scheduler configuration schema (docs/architecture.md, "Scheduler config"), validated by pydantic.

The reader that turns a YAML file into this object is ``kai_ray.io.config``; the schema lives at
the bottom layer so that the shards and the coordinator can take it without importing readers.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kai_ray import labels as L
from kai_ray.quantity import parse_duration

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
