"""Readings taken around a load phase's measured window: the apiserver's requests by verb and
resource, kai-ray's own account of its loop (its /metrics), and each process's CPU time."""

from __future__ import annotations

import urllib.request

import psutil
from prometheus_client.parser import text_string_to_metric_families

from realcluster.cluster import RealCluster


def apiserver_requests(cluster: RealCluster) -> dict[str, float]:
    """apiserver_request_total from the apiserver's /metrics, summed per "VERB resource[/subresource]"
    (empty when the metrics cannot be read: the report then says unknown rather than ending the run)."""
    assert cluster.pki is not None
    request = urllib.request.Request(
        f"{cluster.url}/metrics", headers={"Authorization": f"Bearer {cluster.pki.token('admin')}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60, context=cluster.ssl_context()) as response:
            text = response.read().decode()
    except OSError:
        return {}
    by_kind: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name != "apiserver_request_total":
                continue
            labels = sample.labels
            resource = labels.get("resource") or "-"
            if labels.get("subresource"):
                resource += "/" + labels["subresource"]
            kind = f"{labels.get('verb', '?')} {resource}"
            by_kind[kind] = by_kind.get(kind, 0.0) + sample.value
    return by_kind


def request_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, int]:
    """Requests per kind made between two readings, most frequent first, zeros left out."""
    delta = {kind: round(count - before.get(kind, 0.0)) for kind, count in after.items()}
    return dict(sorted(((k, v) for k, v in delta.items() if v > 0), key=lambda kv: -kv[1]))


def per_pod_requests(requests: dict[str, int], bound: int, top: int = 6) -> str:
    """The apiserver's requests per bound pod, in all and for the ``top`` most frequent kinds."""
    listed = ", ".join(f"{kind} {count / bound:.2f}" for kind, count in list(requests.items())[:top])
    return f"{sum(requests.values()) / bound:.2f} in all; {listed}"


def kai_ray_steps(port: int) -> dict[str, tuple[int, float]]:
    """kai-ray's own account of its loop: how many times each step ran and its total seconds."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
    except OSError:
        return {}
    counts: dict[str, int] = {}
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "kai_ray_loop_step_duration_seconds":
            continue
        for sample in family.samples:
            step = sample.labels.get("step", "")
            if sample.name.endswith("_count"):
                counts[step] = int(sample.value)
            elif sample.name.endswith("_sum"):
                sums[step] = sample.value
    return {step: (counts[step], round(sums.get(step, 0.0), 2)) for step in counts}


def kai_ray_iterations(port: int) -> tuple[float, dict[float, int]]:
    """kai-ray's loop iterations: the longest since its start, and the histogram's cumulative counts
    by upper bound (empty when /metrics cannot be read)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
    except OSError:
        return 0.0, {}
    longest, buckets = 0.0, {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "kai_ray_loop_iteration_longest_seconds":
                longest = sample.value
            elif sample.name == "kai_ray_loop_iteration_duration_seconds_bucket":
                buckets[float(sample.labels["le"])] = int(sample.value)
    return longest, buckets


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """User + system CPU of each process; the scheduler's with its children (Ray's processes)."""
    out: dict[str, float] = {}
    for name, pid in pids.items():
        try:
            process = psutil.Process(pid)
            total = 0.0
            children = process.children(recursive=True) if name == "scheduler" else []
            for member in [process, *children]:
                times = member.cpu_times()
                total += times.user + times.system
            out[name] = total
        except psutil.NoSuchProcess:
            out[name] = 0.0
    return out
