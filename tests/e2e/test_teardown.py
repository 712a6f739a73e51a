"""Starting and stopping the whole real control plane leaves no process and no directory behind."""

from __future__ import annotations

from pathlib import Path

from realcluster.cluster import ClusterOptions, RealCluster
from tests.e2e.conftest import alive


def test_every_component_starts_and_nothing_outlives_stop(binaries: Path) -> None:
    cluster = RealCluster(ClusterOptions(controllers=True, kwok=True, kube_scheduler=True))
    cluster.start()
    try:
        pids = cluster.pids()
        assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}
        assert all(alive(pid) for pid in pids.values())
        workdir = cluster.dir
        assert workdir.is_dir()
    finally:
        cluster.stop()
    assert [name for name, pid in pids.items() if alive(pid)] == []
    assert not workdir.exists()
