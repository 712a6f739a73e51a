"""``python -m loadtests``: the benchmark suite, with its baseline in the same run.

    python -m loadtests            # the full suite (several minutes)
    python -m loadtests --quick    # small sizes, a smoke run
    python -m loadtests --json bench.json

Prints one table per workload as it finishes, then the whole table and the performance
targets next to what was measured. The other benchmarks have their own commands:
``python -m loadtests.bench_shards`` (shard propose and per-pod placement),
``python -m loadtests.bench_gangs`` (also part of this suite) and
``python -m loadtests.bench_devcluster`` (end to end through the embedded API server).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from loadtests.results import BenchRow, flagged, table
from loadtests.suite import FULL, QUICK, run


def targets(rows: Sequence[BenchRow], quick: bool) -> list[tuple[str, str, bool]]:
    """(target, what was measured, met) for the targets of the performance issue."""
    sizes = QUICK if quick else FULL

    def best(prefix: str) -> BenchRow | None:
        kai = [r for r in rows if r.workload.startswith(prefix) and r.system.startswith("kai-ray")]
        return max(kai, key=lambda r: r.pods_per_second, default=None)

    out = []
    basic = best(f"SchedulingBasic {sizes.basic[0]:,} nodes")
    if basic is not None:
        out.append(
            (
                f">= 10,000 pods/s at {sizes.basic[0]:,} nodes",
                f"{basic.pods_per_second:,.0f} ({basic.system})",
                basic.pods_per_second >= 10_000,
            )
        )
        out.append((">= 5x the baseline", f"{basic.ratio or 0:.1f}x", (basic.ratio or 0) >= 5))
    large = best(f"SchedulingBasic {sizes.large[0]:,} nodes")
    if large is not None:
        out.append(
            (
                f">= 5,000 pods/s at {sizes.large[0]:,} nodes",
                f"{large.pods_per_second:,.0f} ({large.system})",
                large.pods_per_second >= 5_000,
            )
        )
        heaviest = max(r.rss_bytes for r in rows if r.workload == large.workload and r.system.startswith("kai-ray"))
        out.append((f"RSS < 2 GB at {sizes.large[0]:,} nodes", f"{heaviest / 2**30:.2f} GB", heaviest < 2 * 2**30))
    fill = best("KAI fill")
    if fill is not None:
        out.append(("KAI's fill test < 2 s", f"{fill.seconds:.2f} s ({fill.system})", fill.seconds < 2))
    book = best("prepare + commit of 100 jobs")
    if book is not None:
        out.append((f"{book.workload} <= 5 ms", f"{book.seconds * 1000:.2f} ms", book.seconds <= 0.005))
    elastic = best("one elastic job")
    if elastic is not None:
        out.append((f"{elastic.workload} <= 1 s", f"{elastic.seconds:.2f} s", elastic.seconds <= 1.0))
    idle = best("idle cycle")
    if idle is not None and idle.workload.endswith("nothing new"):
        out.append(("a cycle with nothing new <= 20 ms", f"{idle.seconds * 1000:.1f} ms", idle.seconds <= 0.02))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loadtests", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run of every workload")
    parser.add_argument("--json", metavar="FILE", help="also write every row and the targets as JSON")
    args = parser.parse_args(argv)
    rows: list[BenchRow] = []
    for group in run(args.quick):
        print(table(group) + "\n", flush=True)
        rows.extend(group)
    print("all workloads\n" + table(rows) + "\n")
    checked = targets(rows, args.quick)
    for target, measured, met in checked:
        print(f"{'met    ' if met else 'not met'}  {target}: {measured}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(
                {
                    "rows": [r.to_json() for r in rows],
                    "targets": [{"target": t, "measured": m, "met": ok} for t, m, ok in checked],
                },
                out,
                indent=1,
            )
    disagreeing = flagged(rows)
    if disagreeing:
        print(f"{len(disagreeing)} rows disagree with their baseline or left pods unplaced", file=sys.stderr)
    return 1 if disagreeing else 0


if __name__ == "__main__":
    raise SystemExit(main())
