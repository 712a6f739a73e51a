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

from loadtests.results import BenchRow, as_deployed, flagged, table
from loadtests.suite import FULL, QUICK, run


def targets(rows: Sequence[BenchRow], quick: bool) -> list[tuple[str, str, bool]]:
    """(target, what was measured, met) for the targets of the distributed-core issue."""
    sizes = QUICK if quick else FULL

    def row(prefix: str, system: str = "kai-ray") -> BenchRow | None:
        found = [r for r in rows if prefix in r.workload and r.system.startswith(system)]
        return max(found, key=lambda r: r.pods_per_second, default=None)

    out = []
    basic = row(f"SchedulingBasic {sizes.basic[0]:,} nodes", "kai-ray: in-process, 1 shard")
    if basic is not None:
        pods_s, ratio = basic.pods_per_second, basic.ratio or 0
        out.append((f">= 15,000 pods/s in process at {sizes.basic[0]:,} nodes", f"{pods_s:,.0f}", pods_s >= 15_000))
        out.append((">= 5x the baseline there", f"{ratio:.1f}x", ratio >= 5))
    large = row(f"SchedulingBasic {sizes.large[0]:,} nodes")
    if large is not None:
        pods_s = large.pods_per_second
        out.append(
            (f">= 10,000 pods/s at {sizes.large[0]:,} nodes", f"{pods_s:,.0f} ({large.system})", pods_s >= 10_000)
        )
    one, two = (row(f"SchedulingBasic {sizes.large[0]:,} nodes", f"kai-ray: {n} Ray") for n in (1, 2))
    if one is not None and two is not None and one.pods_per_second:
        gain = two.pods_per_second / one.pods_per_second
        out.append(("two Ray shard actors >= 1.5x one there", f"{gain:.2f}x", gain >= 1.5))
    gangs = row("gangs x", "kai-ray: in-process")
    if gangs is not None:
        partial = "PARTIAL" in gangs.notes
        out.append(
            (
                ">= 10,000 pods/s for the gangs, 0 partial",
                f"{gangs.pods_per_second:,.0f}",
                not partial and gangs.pods_per_second >= 10_000,
            )
        )
    fill = row("KAI fill")
    if fill is not None:
        out.append(("KAI's fill test < 2 s", f"{fill.seconds:.2f} s ({fill.system})", fill.seconds < 2))
    book = row("prepare + commit of 100 jobs")
    if book is not None:
        out.append((f"{book.workload} <= 5 ms", f"{book.seconds * 1000:.2f} ms", book.seconds <= 0.005))
    elastic = row("one elastic job")
    if elastic is not None:
        out.append((f"{elastic.workload} <= 1 s", f"{elastic.seconds:.2f} s", elastic.seconds <= 1.0))
    idle = row("idle cycle")
    if idle is not None and idle.workload.endswith("nothing new"):
        out.append(("a cycle with nothing new <= 20 ms", f"{idle.seconds * 1000:.1f} ms", idle.seconds <= 0.02))
    topology = row("topology:")
    if topology is not None:
        out.append(
            (
                ">= 5,000 pods/s for gangs with a required rack",
                f"{topology.pods_per_second:,.0f} ({topology.system})",
                topology.pods_per_second >= 5_000,
            )
        )
        clean = all("rack violations 0" in r.notes for r in rows if r.workload.startswith("topology:"))
        out.append(("0 rack constraint violations", "0" if clean else "some (see notes)", clean))
    return out


def predictions(rows: Sequence[BenchRow]) -> list[str]:
    """What each measured row's CPU figures predict on more cores (see ``BenchRow.predicted``)."""
    out = []
    for r in rows:
        if r.coordinator_cpu and r.system.startswith("kai-ray"):
            figures = ", ".join(f"{c} cores {r.predicted(c) or 0:,.0f}" for c in (4, 8, 16))
            out.append(f"{r.workload} | {r.system}: {figures} pods/s")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loadtests", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run of every workload")
    parser.add_argument("--json", metavar="FILE", help="also write every row and the targets as JSON")
    args = parser.parse_args(argv)
    as_deployed()
    rows: list[BenchRow] = []
    for group in run(args.quick):
        print(table(group) + "\n", flush=True)
        rows.extend(group)
    print("all workloads\n" + table(rows) + "\n")
    print("predicted from CPU per pod (coordinator on one core, shards on the rest):")
    for line in predictions(rows):
        print("  " + line)
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
