"""One row per (workload, system) measured, and the table every benchmark prints.

Every benchmark runs kai-ray and a baseline in the same process on the same input, so a
row's ``ratio`` is kai-ray's pods/s divided by the baseline's from that same run; figures
from different runs or machines are never mixed.
"""

from __future__ import annotations

import argparse
import gc
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from kai_ray.app.cli.output import format_table
from kai_ray.app.process_memory import rss_bytes

if TYPE_CHECKING:
    from coordinator.coordinator import Coordinator

__all__ = ["BenchRow", "bench_main", "compare", "compare_runs", "flagged", "rss_bytes", "table"]

FLAGS = ("DIFFERENT", "PARTIAL", "NOT PLACED", "VIOLATED")  # notes that mark a row as disagreeing with its baseline


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
    coordinator_cpu: float = 0.0  # CPU seconds of the coordinator in the measured part (0: not measured)
    shard_cpu: float = 0.0  # CPU seconds the shards reported for it

    def predicted(self, cores: int) -> float | None:
        """Pods/s these CPU figures allow on ``cores`` cores: the coordinator on one core, the
        shards' work split over the others. A round is synchronous (the coordinator waits for
        the shards), so the two add up. Optimistic in two ways: round trips and queueing are
        not counted, and the shards' total CPU is taken to stay the same however many shards
        share it (splitting adds a little per shard)."""
        if not self.coordinator_cpu or not self.pods:
            return None
        per_pod = (self.coordinator_cpu + self.shard_cpu / max(cores - 1, 1)) / self.pods
        return 1.0 / per_pod if per_pod > 0 else None

    @property
    def pods_per_second(self) -> float:
        return self.pods / self.seconds if self.seconds > 0 else 0.0

    def percentile(self, q: float) -> float | None:
        return float(np.percentile(self.latencies, q)) if self.latencies else None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        del out["latencies"]
        out.update(podsPerSecond=self.pods_per_second, p50Seconds=self.percentile(50), p99Seconds=self.percentile(99))
        return out


def compare(rows: Sequence[BenchRow], baseline: BenchRow) -> None:
    """Fill each row's ratio against ``baseline`` (measured in the same run)."""
    for row in rows:
        if baseline.pods_per_second > 0:
            row.ratio = row.pods_per_second / baseline.pods_per_second


W = TypeVar("W")  # a workload
D = TypeVar("D")  # the decisions a run of it made


def compare_runs(
    drive: Callable[[str, Coordinator, W], tuple[BenchRow, D]],
    workload: W,
    systems: Sequence[tuple[str, Callable[[], Coordinator]]],
) -> list[BenchRow]:
    """Each system driven through the workload; the first is the baseline: ratios are against
    it and decisions (what ``drive`` returns beside the row) must equal its."""
    rows: list[BenchRow] = []
    reference: D | None = None
    for name, make in systems:
        row, decided = drive(name, make(), workload)
        if reference is None:
            reference = decided
        elif decided != reference:
            row.notes += "; DIFFERENT DECISIONS from the baseline"
        rows.append(row)
    compare(rows, rows[0])
    return rows


def table(rows: Sequence[BenchRow]) -> str:
    body = []
    for row in rows:
        p99 = row.percentile(99)
        body.append(
            [
                row.workload,
                row.system,
                row.pods,
                f"{row.seconds:.3f}",
                f"{row.pods_per_second:,.0f}",
                "-" if row.ratio is None else f"{row.ratio:.2f}x",
                "-" if p99 is None else f"{p99 * 1000:.1f}",
                f"{row.rss_bytes / 2**20:,.0f}" if row.rss_bytes else "-",
                row.notes or None,
            ]
        )
    return format_table(
        ["workload", "system", "pods", "seconds", "pods/s", "vs baseline", "p99 ms", "RSS MiB", "notes"], body
    )


def flagged(rows: Sequence[BenchRow]) -> list[BenchRow]:
    """Rows whose decisions differ from their baseline's or that left work undone."""
    return [r for r in rows if any(flag in r.notes for flag in FLAGS)]


def as_deployed() -> None:
    """Measure with the garbage-collector thresholds the scheduler's processes run with
    (``kai-ray run``, the coordinator and shard actors): a benchmark's process keeps a
    coordinator, and its baseline, as they do. Python's defaults add a full collection over
    every live object every few thousand pods (about a third of a 10,000-pod cycle)."""
    from kai_ray.app.runtime import tune_gc_for_large_models

    tune_gc_for_large_models()


def fresh_heap() -> None:
    """Before a measured run (not timed): collect what earlier rows left. With the deployed
    thresholds full collections are rare, so earlier systems (and the Ray shard actors their
    handles keep alive) would otherwise linger into this row."""
    gc.collect()


def bench_main(
    argv: Sequence[str] | None, doc: str | None, run: Callable[[bool], list[BenchRow]], footer: str = ""
) -> int:
    """The command line every single benchmark shares: --quick, --json FILE, a table, exit 1 if flagged."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    as_deployed()
    rows = run(args.quick)
    print(table(rows))
    if footer:
        print(footer)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump([r.to_json() for r in rows], out, indent=1)
    return 1 if flagged(rows) else 0
