"""Shared fixtures. Tests that need Ray share one local Ray instance per session."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# A scheduler action that raises fails its session in tests (kai-ray itself rolls the action back
# and goes on): a bug must fail the test that reached it. Set before anything starts a process
# (Ray workers, kai-ray subprocesses) so they inherit it.
os.environ.setdefault("KAI_RAY_RAISE_ACTION_ERRORS", "1")


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """One Ray instance for every test that asks for it, started lazily."""
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


# ---------------------------------------------------------------- the e2e tier (tests/e2e)
E2E = Path(__file__).resolve().parent / "e2e"
WORKLOAD_API_PARAM = "real-workload-api"  # the real cluster whose kube-apiserver serves the Workload API


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--e2e",
        action="store_true",
        help="run the e2e tier in tests/e2e: etcd, kube-apiserver and kwok built from their Go modules (needs Go)",
    )


REAL_PARAMS = {"real", "real-etcd", WORKLOAD_API_PARAM}
REAL_FIXTURES = {
    "real",
    "real_cluster",
    "etcd_watch_cluster",
    "binaries",
    "kai_binaries",
    "prometheus_binary",
    "workload_api_binaries",
}
ORACLE = Path(__file__).resolve().parent / "oracle"


def _needs_real_cluster(item: pytest.Item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    fixtures = set(getattr(item, "fixturenames", ()))
    return E2E in item.path.parents and (params.get("cluster") in REAL_PARAMS or bool(fixtures & REAL_FIXTURES))


def _needs_kai(item: pytest.Item) -> bool:
    return _needs_real_cluster(item) and "kai_binaries" in getattr(item, "fixturenames", ())


def _needs_workload_api(item: pytest.Item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    asked = params.get("cluster") == WORKLOAD_API_PARAM or "workload_api_binaries" in getattr(item, "fixturenames", ())
    return _needs_real_cluster(item) and asked


def _needs_oracle(item: pytest.Item) -> bool:
    return ORACLE in item.path.parents and "oracle" in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without ``--e2e`` the tests of tests/e2e run against the dev cluster only: every test that
    needs the real control plane (built with Go) is deselected, so the default run never needs Go.

    Tests that need Go's builds (the real control plane with ``--e2e``, the KAI oracle) skip with
    the reason when no Go toolchain is on PATH, except under CI (``CI`` set), where Go is part of
    the set-up: there the run fails in one line (``pytest_collection_finish``)."""
    if not config.getoption("--e2e"):
        drop = [item for item in items if _needs_real_cluster(item)]
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = [item for item in items if not _needs_real_cluster(item)]
    if os.environ.get("CI") or shutil.which("go") is not None:
        return
    for item in items:
        for needs, what in GO_BUILDS:
            if needs(item):
                item.add_marker(pytest.mark.skip(reason=f"no Go toolchain on PATH to build {what}"))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Go builds run here, once, before the first test and outside every test's timeout (a cold
    build of the control plane takes a quarter of an hour on two cores; .ci/run does them as steps
    of their own first, so here they are usually found in the cache). A build that cannot run or
    fails ends the run with one line."""
    items = [item for item in session.items if not item.get_closest_marker("skip")]
    if any(_needs_real_cluster(item) for item in items):
        from realcluster.build import BuildFailed, GoMissing, ensure_built

        try:
            ensure_built()
        except (GoMissing, BuildFailed) as failed:
            raise pytest.UsageError(str(failed)) from None
    if any(_needs_kai(item) for item in items):
        from realcluster.build import BuildFailed, GoMissing, ensure_kai_built

        try:
            ensure_kai_built()
        except (GoMissing, BuildFailed) as failed:
            raise pytest.UsageError(f"KAI's components: {failed}") from None
    if any(_needs_workload_api(item) for item in items):
        from realcluster.build import BuildFailed, GoMissing, ensure_workload_api_built

        try:
            ensure_workload_api_built()
        except (GoMissing, BuildFailed) as failed:
            raise pytest.UsageError(f"the Workload API's kube-apiserver: {failed}") from None
    if any(_needs_oracle(item) for item in items):
        from tests.oracle.harness import OracleUnavailable
        from tests.oracle.harness import ensure_built as ensure_oracle_built

        try:
            ensure_oracle_built()
        except OracleUnavailable as failed:
            raise pytest.UsageError(f"oracle tier: {failed}") from None


GO_BUILDS = (
    (_needs_real_cluster, "the real control plane (etcd, kube-apiserver, kwok)"),
    (_needs_kai, "KAI's components"),
    (_needs_workload_api, "the kube-apiserver that serves the Workload API"),
    (_needs_oracle, "the KAI oracle (KAI's scheduler code)"),
)
