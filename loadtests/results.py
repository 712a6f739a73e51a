"""One row per (workload, system) measured, and the table every benchmark prints.

Every benchmark runs kai-ray and a baseline in the same process on the same input, so a
row's ``ratio`` is kai-ray's pods/s divided by the baseline's from that same run; figures
from different runs or machines are never mixed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from kai_ray.cli.output import format_table
from kai_ray.process_memory import rss_bytes

__all__ = ["BenchRow", "compare", "rss_bytes", "table"]


@dataclass(slots=True)
class BenchRow:
    workload: str  # e.g. "5000 nodes / 10000 pods"
    system: str  # "kai-ray (4 shards)", "baseline (per-pod full scan)", ...
    pods: int  # pods placed (bound or pipelined)
    seconds: float  # wall time of the measured part
    latencies: list[float] = field(default_factory=list)  # per decision unit (cycle, gang, pod), seconds
    rss_bytes: int = 0
    ratio: float | None = None  # pods/s over the baseline's pods/s in the same run
    notes: str = ""

    @property
    def pods_per_second(self) -> float:
        return self.pods / self.seconds if self.seconds > 0 else 0.0

    def percentile(self, q: float) -> float | None:
        return float(np.percentile(self.latencies, q)) if self.latencies else None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        del out["latencies"]
        out.update(podsPerSecond=self.pods_per_second, p50Seconds=self.percentile(50),
                   p99Seconds=self.percentile(99))
        return out


def compare(rows: Sequence[BenchRow], baseline: BenchRow) -> None:
    """Fill each row's ratio against ``baseline`` (measured in the same run)."""
    for row in rows:
        if baseline.pods_per_second > 0:
            row.ratio = row.pods_per_second / baseline.pods_per_second


def table(rows: Sequence[BenchRow]) -> str:
    body = []
    for row in rows:
        p99 = row.percentile(99)
        body.append([
            row.workload, row.system, row.pods, f"{row.seconds:.3f}", f"{row.pods_per_second:,.0f}",
            "-" if row.ratio is None else f"{row.ratio:.2f}x",
            "-" if p99 is None else f"{p99 * 1000:.1f}",
            f"{row.rss_bytes / 2**20:,.0f}" if row.rss_bytes else "-", row.notes or None,
        ])
    return format_table(["workload", "system", "pods", "seconds", "pods/s", "vs baseline", "p99 ms", "RSS MiB",
                         "notes"], body)
