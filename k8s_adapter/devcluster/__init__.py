"""An embedded Kubernetes-API-compatible server for tests and ``kai-ray dev-cluster``."""

from k8s_adapter.devcluster.clock import Clock, ManualClock
from k8s_adapter.devcluster.cluster import DevCluster, DevClusterThread
from k8s_adapter.devcluster.errors import ApiError
from k8s_adapter.devcluster.faults import FaultRule, Faults

__all__ = ["ApiError", "Clock", "DevCluster", "DevClusterThread", "FaultRule", "Faults", "ManualClock"]
