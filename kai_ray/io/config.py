"""Reading the scheduler config file (YAML) into ``kai_ray.config.SchedulerConfig``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kai_ray.config import SchedulerConfig
from kai_ray.errors import ConfigError
from kai_ray.io.documents import read_documents


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
    documents = read_documents(path)
    if len(documents) > 1:
        raise ConfigError(f"{path}: expected one YAML document, found {len(documents)}")
    return config_from_mapping(documents[0] if documents else {}, str(path))
