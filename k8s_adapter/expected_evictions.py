"""Pods the scheduler evicted that the watch has not shown leaving yet: they read as releasing.

Evictions go out beside the next cycle. Until the watch brings a victim's deletion, the next
cycle would see it running and its preemptor pending, and search for the same room again (or
evict other pods for it). KAI's cache marks an evicted pod releasing as it sends the eviction;
so does this one. The mark lasts until the watch shows the pod leaving (a deletion timestamp, an
end, or gone), or until the eviction is not sent or not taken: then the pod reads as the watch
last said, and the next cycle decides again.
"""

from __future__ import annotations

from dataclasses import replace

from kai_ray.model import Pod, PodState

MARKABLE = (PodState.RUNNING, PodState.BINDING)


class ExpectedEvictions:
    def __init__(self) -> None:
        self.truth: dict[str, Pod] = {}  # pod -> its record as the watch last said

    def mark(self, pods: dict[str, Pod], key: str) -> bool:
        """Mark the pod releasing in ``pods`` if it still runs (or binds); whether its record changed."""
        pod = pods.get(key)
        if pod is None or key in self.truth or pod.state not in MARKABLE:
            return False
        self.truth[key] = pod
        pods[key] = replace(pod, state=PodState.RELEASING)
        return True

    def unmark(self, pods: dict[str, Pod], key: str) -> bool:
        """The pod's eviction was not sent or not taken: its record is the watch's again."""
        truth = self.truth.pop(key, None)
        if truth is None or key not in pods:
            return False
        pods[key] = truth
        return True

    def seen(self, key: str, pod: Pod) -> Pod:
        """The record to keep for a pod the watch just brought: still releasing while marked and
        the watch does not show it leaving yet."""
        truth = self.truth.get(key)
        if truth is None:
            return pod
        if pod.state in MARKABLE and pod.uid == truth.uid:
            self.truth[key] = pod
            return replace(pod, state=PodState.RELEASING)
        del self.truth[key]  # leaving, ended or re-created, as the watch says: the mark is done
        return pod

    def gone(self, key: str) -> None:
        self.truth.pop(key, None)
