"""An embedded Kubernetes-API-compatible server for tests and ``kai-ray dev-cluster``."""

from devcluster.clock import Clock, ManualClock
from devcluster.cluster import DevCluster, DevClusterThread
from devcluster.errors import ApiError
from devcluster.faults import FaultRule, Faults

__all__ = ["ApiError", "Clock", "DevCluster", "DevClusterThread", "FaultRule", "Faults", "ManualClock"]
