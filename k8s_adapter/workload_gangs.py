"""The Kubernetes Workload API's gangs as the cache keeps them: the scheduling.k8s.io PodGroups
and Workloads as read, and each gang as the PodGroup it is scheduled as (a KAI PodGroup of the
same key wins, ``ClusterCache``)."""

from __future__ import annotations

from pod_grouper.pod_groups import RawPodGroup
from pod_grouper.workload_api import GangPodGroup, WorkloadObject, gang_raw_group


class WorkloadGangs:
    def __init__(self) -> None:
        self.objects: dict[str, GangPodGroup] = {}
        self.workloads: dict[str, WorkloadObject] = {}
        self.groups: dict[str, RawPodGroup] = {}  # gang key -> the PodGroup it is scheduled as

    def of_workload(self, workload: str) -> list[str]:
        """The gangs of a Workload (namespace/name)."""
        namespace, _, name = workload.partition("/")
        return [k for k, g in self.objects.items() if g.namespace == namespace and g.workload == name]

    def regroup(self, keys: list[str]) -> list[str]:
        """Make ``keys`` again as scheduled, after their object or Workload changed; returns them."""
        for key in keys:
            gang = self.objects.get(key)
            if gang is None:
                self.groups.pop(key, None)
            else:
                self.groups[key] = gang_raw_group(gang, self.workloads)
        return keys
