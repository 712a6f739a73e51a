"""An embedded Kubernetes-API-compatible server for tests and `kai-ray dev-cluster`."""

from k8s_adapter.devcluster.cluster import DevCluster, DevClusterThread
from k8s_adapter.devcluster.faults import FailRule

__all__ = ["DevCluster", "DevClusterThread", "FailRule"]
