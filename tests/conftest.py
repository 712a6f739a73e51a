"""Shared fixtures. Tests that need Ray share one local Ray instance per session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """One Ray instance for every test that asks for it, started lazily."""
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()
