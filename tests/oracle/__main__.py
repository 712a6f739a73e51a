"""The long differential run: seeded random clusters through kai-ray and the KAI oracle.

    python -m tests.oracle                          # 2,000 clusters, every focus
    python -m tests.oracle --count 200 --first 5000 # other seeds
    python -m tests.oracle --seeds 17,42 --shrink --out /tmp/mismatches

Prints one line per disagreement and a table by focus; exit 1 when any case is a
mismatch. ``--shrink`` reduces each mismatch to a small case and ``--out`` writes them
as case files (the format of ``tests/oracle/cases/``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.oracle.cases import disagreement, write_case
from tests.oracle.clusters import FOCI, generate
from tests.oracle.compare import check
from tests.oracle.contended import CONTENDED_FOCI
from tests.oracle.harness import Oracle, OracleUnavailable, ensure_built
from tests.oracle.kai_fixes import FIXES, FixedKai, named_fixes
from tests.oracle.manifests import Case
from tests.oracle.shrink import shrink


def _seeds(args: argparse.Namespace) -> list[int]:
    if args.seeds:
        return [int(s) for s in args.seeds.split(",") if s.strip()]
    return list(range(args.first, args.first + args.count))


Checked = tuple[str, list[str], dict[str, Any] | None, dict[str, Any]]


def _same_disagreement(oracle: Oracle, original: Checked) -> Callable[[Case], bool]:
    """A smaller case still shows the original's disagreement (some of its pods, with the same
    statuses on both sides), not merely some mismatch: shrinking toward "any mismatch" drifted
    to an unrelated known difference. Where the original disagrees only on nodes, any mismatch
    will do."""
    wanted = disagreement(original[2], original[3])

    def still_fails(candidate: Case) -> bool:
        result, _, kai, ray = check(oracle, candidate)
        if result != "mismatch":
            return False
        found = disagreement(kai, ray)
        return not wanted or (bool(found) and found <= wanted)

    return still_fails


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.oracle", description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000, help="clusters to compare (default 2000)")
    parser.add_argument("--first", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--seeds", help="comma-separated seeds instead of --first/--count")
    parser.add_argument(
        "--focus",
        choices=(*FOCI, *CONTENDED_FOCI, "contended"),
        help="one focus for every seed (default: by seed; contended: one of the contended foci by seed)",
    )
    parser.add_argument("--shrink", action="store_true", help="shrink each mismatch to a small case")
    parser.add_argument("--out", type=Path, help="write shrunk mismatches as case files here")
    args = parser.parse_args(argv)
    try:
        binary = ensure_built()
    except OracleUnavailable as error:
        print(f"oracle: {error}", file=sys.stderr)
        return 2
    started = time.monotonic()
    table: Counter[tuple[str, str]] = Counter()
    mismatches: list[Case] = []
    explained: Counter[str] = Counter()
    fixed = FixedKai()
    with Oracle(binary) as oracle:
        for seed in _seeds(args):
            case = generate(seed, args.focus)
            checked = check(oracle, case, fixed=fixed)
            result, diffs = checked[0], checked[1]
            kind = result.split(":")[0]
            table[(case.focus, kind)] += 1
            if kind in ("deliberate", "kai-bug"):
                explained[result] += 1
            if kind in ("mismatch", "kai-bug", "kai-hang", "kai-crash"):
                print(f"{kind.upper()}{result[len(kind) :]} {case.case_id}: {'; '.join(diffs[:3])}", flush=True)
            if result == "mismatch":
                mismatches.append(case)
            if args.shrink and kind in ("mismatch", "kai-bug"):
                # Shrunk against KAI as released (the same disagreement), then classified again.
                small = shrink(case, _same_disagreement(oracle, checked))
                verdict, diffs, kai, ray = check(oracle, small, fixed=fixed)
                print(f"  shrunk to {len(small.documents)} objects, {verdict}: {'; '.join(diffs[:4])}", flush=True)
                if args.out and kai is not None:
                    args.out.mkdir(parents=True, exist_ok=True)
                    write_case(args.out / f"{small.case_id}.yaml", small, kai, ray, diffs, verdict)
    fixed.close()
    seconds = time.monotonic() - started
    columns = ("same", "equivalent", "kai-varies", "deliberate", "kai-bug", "mismatch", "kai-hang", "kai-crash")
    print("\n" + f"{'focus':<26}" + "".join(f"{c:>12}" for c in columns))
    for focus in (*FOCI, *CONTENDED_FOCI):
        row = [table[(focus, c)] for c in columns]
        if any(row):
            print(f"{focus:<26}" + "".join(f"{n:>12}" for n in row))
    for name, count in sorted(explained.items()):
        print(f"{name.replace(':', ': ')}: {count}")
    for fix in sorted({fix for name in explained for fix in named_fixes(name)}):
        print(f"  {fix}: {FIXES[fix]}")
    total = sum(table.values())
    print(f"{total} clusters in {seconds:.0f} s, {len(mismatches)} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
