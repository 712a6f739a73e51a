"""Reading snapshots: ``kai-ray schedule --snapshot`` end to end, and the reading stage alone.

Two snapshot shapes, each written with and without its jobs, as a YAML List and as a JSON List
the way ``kubectl get -o yaml/json`` prints objects:
- fill: KAI's scale test, 500 nodes of 8 GPUs and 4,000 one-GPU jobs (a PodGroup and a pod
  each) in 4 queues, exactly enough to fill every GPU;
- gangs: 1,000 gangs of 8 one-GPU pods (minMember 8) on 5,000 8-GPU nodes, in 4 queues.

A third, contended row: ``loadtests.contention``'s reclaim storm (500 full 8-GPU nodes, 4,000
reclaiming one-GPU jobs) as a YAML List through ``kai-ray schedule --actions reclaim``, the whole
command timed, the reading's share in the notes.

End to end: ``kai-ray schedule --snapshot F --actions allocate -o json`` as a subprocess (with
bytecode caching on, after one warm-up run), the median of seven, the runs with and without the
jobs taking turns. The jobs' cost is the time with them minus the time without (the empty
cluster), so a row's pods/s is the pods placed divided by that difference. The YAML and the
JSON snapshot must give the same decisions and every pod must be placed, or the row is flagged.

In process, per object: decoding (file -> dicts, one file per kind) and the parsers
(dicts -> model records), the best of three each, then the whole loader on the full file.

    python -m loadtests.bench_read            # the full shapes
    python -m loadtests.bench_read --quick    # a tenth of them
    python -m loadtests.bench_read --keep DIR # keep the snapshots and the decisions printed
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from kai_ray.app.cli.output import format_table
from kai_ray.app.sim.apiserver import node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_ray.io.documents import read_documents, read_text
from kai_ray.io.fields import ObjectReader
from kai_ray.io.parse_core import parse_node, parse_pod
from kai_ray.io.parse_kai import parse_pod_group
from kai_ray.io.snapshot_loader import load_snapshot
from loadtests.contention import reclaim_storm
from loadtests.read_snapshots import (
    CREATED,
    FULL,
    QUICK,
    Manifest,
    ReadShape,
    cluster_objects,
    priority_class,
    write_list,
)
from loadtests.results import BenchRow, bench_main

NOW = "2025-01-01T00:00:00Z"  # the session's clock: the decisions printed do not depend on the day
FORMATS = ("yaml", "json")
RUNS = 3  # in process: the best of these
# Through the command: the median of these, the runs with and without the jobs taking turns. On
# a shared 2-core VM a median of three moved by a tenth from one run of this benchmark to the
# next, and the jobs' cost is a difference of two such medians.
CLI_RUNS = 7
PLACED = ("Binding", "Running", "Pipelined")
PYTHON_GC_THRESHOLDS = (700, 10, 10)  # CPython's defaults, which the command runs with

_Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# ---------------------------------------------------------------- end to end


@dataclass(frozen=True, slots=True)
class CliRun:
    seconds: float  # the median of CLI_RUNS
    output: bytes  # the decisions printed (-o json)


def _cli_env() -> dict[str, str]:
    # Bytecode caching stays on, as for an installed kai-ray: the median is of warm starts.
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_cli(snapshot: Path, actions: str = "allocate") -> CliRun:
    return run_cli_in_turns([snapshot], actions)[0]


def run_cli_in_turns(snapshots: Sequence[Path], actions: str = "allocate") -> list[CliRun]:
    """The command on each snapshot, taking turns, so that the machine's slow and fast minutes
    fall on all of them alike."""
    env = _cli_env()
    commands = [
        [sys.executable, "-m", "kai_ray", "schedule", "--snapshot", str(snapshot), "--actions", actions]
        + ["--now", NOW, "-o", "json"]
        for snapshot in snapshots
    ]
    times: list[list[float]] = [[] for _ in snapshots]
    outputs = [b""] * len(snapshots)
    for attempt in range(CLI_RUNS + 1):
        for i, command in enumerate(commands):
            start = time.perf_counter()
            done = subprocess.run(command, env=env, capture_output=True, check=False)
            elapsed = time.perf_counter() - start
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(command)}: exit {done.returncode}: {done.stderr.decode()[-2000:]}")
            if attempt:  # the first run warms the bytecode and file caches
                times[i].append(elapsed)
            outputs[i] = done.stdout
    return [CliRun(statistics.median(t), output) for t, output in zip(times, outputs, strict=True)]


def _placed(output: bytes) -> int:
    return sum(1 for d in json.loads(output)["pods"].values() if d["status"] in PLACED)


def cli_rows(shape: ReadShape, files: Mapping[tuple[str, bool], Path], keep: Path | None) -> list[BenchRow]:
    rows, outputs = [], {}
    for fmt in FORMATS:
        empty, full = run_cli_in_turns([files[(fmt, False)], files[(fmt, True)]])
        outputs[fmt] = full.output
        if keep is not None:
            (keep / f"{shape.name}-decisions-from-{fmt}.json").write_bytes(full.output)
        placed = _placed(full.output)
        notes = f"{full.seconds:.2f} s with the jobs, {empty.seconds:.2f} s without"
        if placed < shape.pods:
            notes += f"; NOT PLACED: {shape.pods - placed} pods"
        label = f"{shape.label} ({fmt.upper()})"
        rows.append(BenchRow(label, "kai-ray schedule", placed, full.seconds - empty.seconds, notes=notes))
    if len(set(outputs.values())) > 1:
        for row in rows:
            row.notes += "; DIFFERENT DECISIONS from YAML and JSON"
    return rows


def reclaim_storm_row(quick: bool, directory: Path) -> BenchRow:
    """The contended case through the command: ``loadtests.contention``'s reclaim storm (8-GPU
    nodes full of one team's one-GPU jobs; a second team, owed half, submits as many) as a YAML
    List, one ``kai-ray schedule --actions reclaim``. The row's time is the whole command, start,
    reading and printing included; the note gives the reading's share (the loader alone,
    in process) and the time per contending job."""
    workload = reclaim_storm(50, 400) if quick else reclaim_storm()
    objects: list[Manifest] = [priority_class("train", 50)]
    for deltas in (workload.cluster, workload.pending):
        objects += [node_manifest(n) for n in deltas.nodes_upserted]
        objects += [queue_manifest(q) for q in deltas.queues_upserted]
        objects += [pod_group_manifest(g) for g in deltas.pod_groups_upserted]
        objects += [pod_manifest(p, CREATED) for p in deltas.pods_upserted]
    path = write_list(objects, directory / "reclaim-storm.yaml")
    run = run_cli(path, "reclaim")
    decided = json.loads(run.output)
    contenders = {p.key for p in workload.pending.pods_upserted}
    placed = sum(1 for key, d in decided["pods"].items() if key in contenders and d["status"] in PLACED)
    evicted = sum(1 for d in decided["pods"].values() if d["status"] == "Releasing")
    reading = _whole(path)
    notes = (
        f"{placed:,} placed, {evicted:,} evicted; reading {reading:.2f} s of it; "
        f"{run.seconds / workload.contenders * 1e3:.2f} ms per contending job"
    )
    return BenchRow(f"{workload.label} (YAML)", "kai-ray schedule --actions reclaim", placed, run.seconds, notes=notes)


# ---------------------------------------------------------------- in process, per object


def _best(measure: Callable[[], object]) -> float:
    """The best of RUNS, with the garbage collector paused as ``load_snapshot`` pauses it (the
    stages are compared as code; what collections cost shows in the whole loader's row)."""
    best = float("inf")
    for _ in range(RUNS):
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            measure()
            best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
    return best


def _decode(path: Path) -> None:
    read_documents(path)


def _decode_with_pyyaml(path: Path) -> None:
    """The baseline: PyYAML's C loader alone, as every YAML file was read before the fast reader."""
    list(yaml.load_all(read_text(path), Loader=_Loader))


def _parse_all(kind: str, docs: Sequence[Mapping[str, Any]]) -> None:
    warnings: list[str] = []
    if kind == "Node":
        for i, doc in enumerate(docs):
            parse_node(ObjectReader(doc, i))
    elif kind == "Pod":
        for i, doc in enumerate(docs):
            parse_pod(ObjectReader(doc, i), warnings)
    else:
        for i, doc in enumerate(docs):
            parse_pod_group(ObjectReader(doc, i), warnings)


def stage_rows(shape: ReadShape, objects: Sequence[Manifest], directory: Path) -> list[list[Any]]:
    """µs per object of each kind: decoding each format, then the parser; then the whole loader."""
    rows: list[list[Any]] = []
    for kind in ("Pod", "PodGroup", "Node"):
        docs = [o for o in objects if o["kind"] == kind]
        row: list[Any] = [shape.name, kind, len(docs)]
        for fmt in FORMATS:
            path = write_list(docs, directory / f"{shape.name}-{kind}.{fmt}")
            row.append(_best(partial(_decode, path)) / len(docs) * 1e6)
            if fmt == "yaml":
                row.append(_best(partial(_decode_with_pyyaml, path)) / len(docs) * 1e6)
        row.append(_best(partial(_parse_all, kind, docs)) / len(docs) * 1e6)
        rows.append([f"{v:.1f}" if isinstance(v, float) else v for v in row])
    for fmt in FORMATS:
        path = directory / f"{shape.name}-with-jobs.{fmt}"
        per_object = _whole(path) / len(objects) * 1e6
        rows.append([shape.name, f"whole loader ({fmt.upper()})", len(objects), "", "", "", f"{per_object:.1f}"])
    return rows


def _whole(path: Path) -> float:
    """``load_snapshot`` as ``kai-ray schedule`` runs it, with Python's default collector
    thresholds (this process runs with the deployed ones), the best of RUNS."""
    deployed = gc.get_threshold()
    gc.set_threshold(*PYTHON_GC_THRESHOLDS)
    try:
        best = float("inf")
        for _ in range(RUNS):
            gc.collect()
            start = time.perf_counter()
            load_snapshot(path)
            best = min(best, time.perf_counter() - start)
        return best
    finally:
        gc.set_threshold(*deployed)


def run(quick: bool, keep: Path | None = None) -> list[BenchRow]:
    rows: list[BenchRow] = []
    stages: list[list[Any]] = []
    with tempfile.TemporaryDirectory(prefix="kai-ray-read-") as scratch:
        directory = keep or Path(scratch)
        directory.mkdir(parents=True, exist_ok=True)
        for shape in QUICK if quick else FULL:
            files: dict[tuple[str, bool], Path] = {}
            for with_jobs in (False, True):
                objects = cluster_objects(shape, with_jobs)
                suffix = "with-jobs" if with_jobs else "empty"
                for fmt in FORMATS:
                    files[(fmt, with_jobs)] = write_list(objects, directory / f"{shape.name}-{suffix}.{fmt}")
            stages += stage_rows(shape, objects, directory)
            rows += cli_rows(shape, files, keep)
        rows.append(reclaim_storm_row(quick, directory))
    headers = ["shape", "kind", "objects", "decode YAML µs", "PyYAML alone µs", "decode JSON µs", "to model µs"]
    print("In process, per object (best of 3); the whole loader's figure is per object of the file:")
    print(format_table(headers, stages))
    print()
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--keep", type=Path, metavar="DIR")
    args, rest = own.parse_known_args(argv)
    return bench_main(rest, __doc__, lambda quick: run(quick, args.keep))


if __name__ == "__main__":
    raise SystemExit(main())
