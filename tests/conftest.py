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


# ---------------------------------------------------------------- the e2e tier (tests/e2e)
E2E = Path(__file__).resolve().parent / "e2e"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--e2e",
        action="store_true",
        help="run the e2e tier in tests/e2e: etcd, kube-apiserver and kwok built from their Go modules (needs Go)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--e2e"):
        from realcluster.build import GoMissing, go_binary

        try:
            go_binary()
        except GoMissing as missing:
            raise pytest.UsageError(str(missing)) from None  # one line, and the run fails


REAL_PARAMS = {"real", "real-etcd"}
REAL_FIXTURES = {"real", "real_cluster", "etcd_watch_cluster", "binaries", "prometheus_binary"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without ``--e2e`` the tests of tests/e2e run against the dev cluster only: every test that
    needs the real control plane (built with Go) is deselected, so the default run never needs Go."""
    if config.getoption("--e2e"):
        return
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        fixtures = set(getattr(item, "fixturenames", ()))
        real_param = params.get("cluster") in REAL_PARAMS
        needs_real = E2E in item.path.parents and (real_param or bool(fixtures & REAL_FIXTURES))
        (drop if needs_real else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
