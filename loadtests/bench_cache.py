"""The adapter cache at scale: what a watch event costs on the event loop, and what turning a
batch of changes into deltas costs, against a baseline that resolves every PodGroup per batch.

    python -m loadtests.bench_cache [--pods 100000] [--quick]

The cluster: ``--pods`` pods in PodGroups of eight, a tenth of them running, as a list the
cache has already taken in. Each row changes ``k`` pods (a watch MODIFIED event each) and times
``take_deltas``. The baseline is the same cache made to resolve every PodGroup again on each
batch, which is what it did before it tracked the groups a batch touches (154 ms per
changed pod at 100,000 pods). Both must send the same deltas.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from k8s_adapter.cache import ClusterCache
from k8s_adapter.kinds import POD_GROUPS, PODS, QUEUES

GROUP_SIZE = 8


def _pod(i: int, version: int, running: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "kai-scheduler",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}],
    }
    if running:
        spec["nodeName"] = f"node-{i % 1000}"
    return {
        "metadata": {
            "name": f"p{i}",
            "namespace": "bench",
            "uid": f"u{i}",
            "resourceVersion": str(version),
            "annotations": {"pod-group-name": f"g{i // GROUP_SIZE}"},
            "labels": {"kai.scheduler/queue": "q"},
        },
        "spec": spec,
        "status": {"phase": "Running" if running else "Pending"},
    }


def _cluster(pods: int) -> tuple[ClusterCache, int]:
    cache = ClusterCache()
    queue = {"metadata": {"name": "q", "resourceVersion": "1"}, "spec": {"resources": {}}}
    cache.on_list(QUEUES, [queue])
    groups = [
        {"metadata": {"name": f"g{g}", "namespace": "bench", "resourceVersion": "2"}, "spec": {"minMember": GROUP_SIZE}}
        for g in range(-(-pods // GROUP_SIZE))
    ]
    cache.on_list(POD_GROUPS, groups)
    cache.on_list(PODS, [_pod(i, 3, i % 10 == 0) for i in range(pods)])
    cache.take_deltas()
    return cache, 4


def _batch(cache: ClusterCache, changed: int, version: int, pods: int, full: bool) -> tuple[float, float, int]:
    """(seconds per event on the loop, seconds for take_deltas, deltas sent)."""
    events = [_pod((j * 7919) % pods, version + j, True) for j in range(changed)]  # spread over the cluster
    started = time.perf_counter()
    for event in events:
        cache.on_event(PODS, "MODIFIED", event)
    per_event = (time.perf_counter() - started) / max(changed, 1)
    if full:
        cache.membership.index.touch_all(cache.raw_groups)  # the baseline: every group resolved again
    started = time.perf_counter()
    deltas = cache.take_deltas()
    return per_event, time.perf_counter() - started, len(deltas.pods_upserted) + len(deltas.pod_groups_upserted)


def run(pods: int, batches: Sequence[int]) -> list[tuple[str, int, float, float, float, float]]:
    """Rows of (system, changed pods, us per event, ms per take_deltas, ms per changed pod, ratio)."""
    rows = []
    for changed in batches:
        results: dict[str, tuple[float, float, int]] = {}
        for system, full in (("baseline (all groups)", True), ("kai-ray (touched groups)", False)):
            cache, version = _cluster(pods)
            results[system] = _batch(cache, changed, version, pods, full)
        baseline_seconds = results["baseline (all groups)"][1]
        for system, (per_event, seconds, sent) in results.items():
            if sent != results["baseline (all groups)"][2]:
                raise SystemExit(f"{system} sent {sent} deltas, the baseline other ones")
            rows.append(
                (system, changed, per_event * 1e6, seconds * 1e3, seconds * 1e3 / changed, baseline_seconds / seconds)
            )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtests.bench_cache", description=__doc__)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="10,000 pods")
    args = parser.parse_args(argv)
    pods = 10_000 if args.quick else args.pods
    print(f"{pods:,} pods in PodGroups of {GROUP_SIZE}")
    print(f"{'system':<26}{'changed':>8}{'us/event':>10}{'ms/batch':>10}{'ms/pod':>10}{'speed-up':>10}")
    for system, changed, per_event, batch_ms, per_pod, ratio in run(pods, (1, 100, 1000)):
        print(f"{system:<26}{changed:>8}{per_event:>10.1f}{batch_ms:>10.2f}{per_pod:>10.3f}{ratio:>9.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
