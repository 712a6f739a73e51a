"""The e2e tier's clusters: one real control plane for the session, a fresh dev cluster per test.

The real cluster's binaries come from realcluster.build (built once per pinned version set);
its processes are checked to be gone when the session ends.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from realcluster.build import BuildFailed, build_record, ensure_built, ensure_kai_built, ensure_workload_api_built
from realcluster.cluster import ClusterOptions, RealCluster
from tests.e2e.backends import Backend, dev_backend, real_backend, seed_real
from tests.helm.chart import NAMESPACE, crds

SERVICE_ACCOUNT = "kai-ray"
SA_USER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"


@pytest.fixture(scope="session")
def binaries() -> Path:
    try:
        return ensure_built()
    except BuildFailed as failed:
        pytest.exit(str(failed), returncode=1)


@pytest.fixture(scope="session")
def kai_binaries() -> Path:
    """KAI's own components (realcluster/go/kai), built once like the control plane."""
    try:
        return ensure_kai_built()
    except BuildFailed as failed:
        pytest.exit(str(failed), returncode=1)


@pytest.fixture(scope="session")
def workload_api_binaries(binaries: Path) -> Path:
    """The kube-apiserver that serves the Workload API (realcluster/go/kube137), built once."""
    try:
        return ensure_workload_api_built()
    except BuildFailed as failed:
        pytest.exit(str(failed), returncode=1)


@pytest.fixture(scope="session")
def prometheus_binary() -> str:
    """The e2e tier's Prometheus server (Debian's package; .ci/run installs it)."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("the e2e tier needs a prometheus binary: apt-get install prometheus", pytrace=False)
    return binary


def real_options() -> ClusterOptions:
    return ClusterOptions(
        controllers=True,
        kwok=True,
        node_lease_seconds=40,
        compaction_seconds=5,  # short: versions older than a few seconds are gone from etcd
        audit_users=(SA_USER,),
    )


def etcd_watch_options() -> ClusterOptions:
    """Watches served by etcd itself (no watch cache) and compaction every 2 s: a watch resumed
    from a version older than that is told 410 Gone by etcd, through the apiserver."""
    return ClusterOptions(
        controllers=True,
        kwok=True,
        node_lease_seconds=40,
        compaction_seconds=COMPACTION_SECONDS,
        extra_apiserver_args=("--watch-cache=false",),
    )


COMPACTION_SECONDS = 2


@pytest.fixture(scope="session")
def real_cluster(binaries: Path) -> Iterator[RealCluster]:
    yield from _running(real_options())


@pytest.fixture(scope="session")
def etcd_watch_cluster(binaries: Path) -> Iterator[RealCluster]:
    yield from _running(etcd_watch_options())


def _running(options: ClusterOptions) -> Iterator[RealCluster]:
    cluster = RealCluster(options, keep=bool(os.environ.get("KAI_RAY_E2E_KEEP")))
    started = time.monotonic()
    cluster.start()
    try:
        with ThreadPoolExecutor(1) as pool:  # fixtures may be set up while an event loop runs
            pool.submit(asyncio.run, seed_real(cluster, crds())).result()
        record = build_record(cluster.bin)
        print(f"\nreal cluster up in {time.monotonic() - started:.1f}s; built {record.get('versions')}")
        yield cluster
    finally:
        pids = list(cluster.pids().values())
        cluster.stop()
        left = [pid for pid in pids if alive(pid)]
        assert not left, f"processes left behind: {left}"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(params=["dev", "real"])
async def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """The same test against the dev cluster and against the real one (``real-etcd``: the real
    one with watches served by etcd, for tests that ask for it by indirect parametrization)."""
    if request.param == "dev":
        backend = await dev_backend(tmp_path)
        try:
            yield backend
        finally:
            await backend.close()
            assert backend.dev is not None
            await backend.dev.stop()
    else:
        name = "etcd_watch_cluster" if request.param == "real-etcd" else "real_cluster"
        real: RealCluster = request.getfixturevalue(name)
        backend = await real_backend(real)
        try:
            yield backend
        finally:
            await backend.close()


@pytest.fixture
async def real(real_cluster: RealCluster) -> AsyncIterator[Backend]:
    """The real cluster alone, emptied of earlier tests' objects."""
    backend = await real_backend(real_cluster)
    try:
        yield backend
    finally:
        await backend.close()
