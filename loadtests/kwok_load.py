"""The kwok load test on a real control plane, kai-ray side by side with kube-scheduler.

    python -m loadtests.kwok_load                  # both modes: 5,000 nodes, 10,000 pods (+ 1,000 gangs x 8)
    python -m loadtests.kwok_load --quick          # the reduced sizes CI runs, both modes
    python -m loadtests.kwok_load --mode arrivals --skip gangs --json kwok.json

Every phase runs on a fresh cluster (etcd + kube-apiserver + kwok, built from their Go modules by
realcluster/). Two modes, both by default (--mode preloaded|arrivals|both):

preloaded: the nodes and pods are created before any scheduler starts; kai-ray runs as the
chart runs it by default (--no-pod-grouper: bare pods are one-pod gangs in memory).
1. kai-ray: N kwok GPU nodes (the simulator's pools, tainted as kwok's), P single-GPU pods.
2. kube-scheduler of the same Kubernetes release: the same nodes and pods, with its scheduler name.
3. kai-ray alone: G gangs of 8 single-GPU pods, each a PodGroup with minMember 8.
Time runs from the scheduler's process start until a watch opened beforehand has seen every pod
bound.

arrivals: each scheduler (kai-ray at `kai-ray run`'s defaults, its pod grouper making a
PodGroup per bare pod; then kube-scheduler) starts on a cluster with the nodes only and binds a
probe pod (not timed); then the P single-GPU bare pods are created in batches of --batch
(default 250), each batch concurrently through the API, the next as soon as the apiserver has
accepted the previous one (or paced at --arrival-rate pods/s). Time runs from the first create
until every pod has a node: pods created in, all bound at, last bound after the last create.

Both schedulers use the admin identity (exempt from API priority and fairness alike);
kube-scheduler's client rate limit is raised from its default 50/s to 5,000/s so that it is not
throttled by its own client. The report gives pods/s, kai-ray's ratio to kube-scheduler, times
to bind, the apiserver's requests per bound pod by verb and resource, each process's CPU over
the window and kai-ray's loop steps (and, in arrivals, what its log says of its cycles).
Exit code 1 when a pod stayed unbound or a gang was left partial.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kai_ray.app.cli.output import format_table
from loadtests.kwok_arrivals import BATCH, ArrivalResult, arrival_pods, arrivals_ratio, arrivals_report, run_arrivals
from loadtests.kwok_phase import KAI, KUBE, NAMESPACE, PhaseResult, load_pod, run_phase
from loadtests.kwok_readings import per_pod_requests
from realcluster.build import BuildFailed, GoMissing, ensure_built

PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
GROUPS = f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NAMESPACE}/podgroups"


MODES = ("preloaded", "arrivals", "both")


@dataclass(frozen=True, slots=True)
class Size:
    nodes: int
    pods: int
    gangs: int
    arrival_nodes: int
    arrival_pods: int
    gang_size: int = 8


FULL = Size(nodes=5_000, pods=10_000, gangs=1_000, arrival_nodes=5_000, arrival_pods=10_000)
# CI's sizes. Arrivals are smaller than the preloaded phases: kai-ray binds arriving pods at a
# fraction of its preloaded rate (its binds queue up behind the creates, docs/e2e.md), and CI's
# budget allows about two minutes more for both schedulers' clusters, start-ups and binds.
QUICK = Size(nodes=1_000, pods=2_000, gangs=200, arrival_nodes=500, arrival_pods=1_000)


def chosen_size(base: Size, nodes: int | None, pods: int | None, gangs: int | None) -> Size:
    """``base`` with the sizes given on the command line; --nodes and --pods set both modes'."""
    return Size(
        nodes=nodes or base.nodes,
        pods=pods or base.pods,
        gangs=gangs or base.gangs,
        arrival_nodes=nodes or base.arrival_nodes,
        arrival_pods=pods or base.arrival_pods,
        gang_size=base.gang_size,
    )


def phases(mode: str, skip: Sequence[str]) -> tuple[list[str], list[str]]:
    """The preloaded and the arrivals phases to run, by name, in order."""
    preloaded = [p for p in ("kai-ray", "kube-scheduler", "gangs") if p not in skip]
    arriving = [p for p in ("kai-ray", "kube-scheduler") if p not in skip]
    return (preloaded if mode in ("preloaded", "both") else [], arriving if mode in ("arrivals", "both") else [])


def single_pods(count: int, scheduler: str) -> list[tuple[str, dict[str, Any]]]:
    return [(PODS, load_pod(f"load-{i:05d}", scheduler)) for i in range(count)]


def gangs(count: int, size: int) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, int]]:
    items: list[tuple[str, dict[str, Any]]] = []
    sizes: dict[str, int] = {}
    for g in range(count):
        name = f"gang-{g:04d}"
        sizes[name] = size
        group = {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": size, "queue": "load-team"},
        }
        items.append((GROUPS, group))
        items += [(PODS, load_pod(f"{name}-{i}", KAI, group=name)) for i in range(size)]
    return items, sizes


async def run_preloaded(size: Size, shards: int | None, which: Sequence[str]) -> list[PhaseResult]:
    results = []
    workload = f"{size.nodes} nodes / {size.pods} pods"
    if "kai-ray" in which:
        results.append(await run_phase(workload, KAI, size.nodes, single_pods(size.pods, KAI), {}, shards))
        print(row_text(results[-1]), file=sys.stderr)
    if "kube-scheduler" in which:
        results.append(await run_phase(workload, KUBE, size.nodes, single_pods(size.pods, KUBE), {}))
        print(row_text(results[-1]), file=sys.stderr)
    if "gangs" in which:
        items, sizes = gangs(size.gangs, size.gang_size)
        name = f"{size.nodes} nodes / {size.gangs} gangs x {size.gang_size}"
        results.append(await run_phase(name, KAI, size.nodes, items, sizes, shards))
        print(row_text(results[-1]), file=sys.stderr)
    return results


async def run_arriving(
    size: Size, shards: int | None, which: Sequence[str], batch: int, rate: float | None
) -> list[ArrivalResult]:
    results = []
    workload = f"{size.arrival_nodes} nodes / {size.arrival_pods} pods arriving"
    for who, scheduler in (("kai-ray", KAI), ("kube-scheduler", KUBE)):
        if who in which:
            pods = arrival_pods(size.arrival_pods, scheduler)
            result = await run_arrivals(workload, scheduler, size.arrival_nodes, pods, batch, rate, shards)
            results.append(result)
            print(
                f"{workload}, {scheduler}: {result.bound}/{result.pods} bound, created in {result.created_in:.1f}s, "
                f"all bound at {result.all_bound_at:.1f}s ({result.pods_per_second:.1f} pods/s)",
                file=sys.stderr,
            )
    return results


def row_text(result: PhaseResult) -> str:
    return (
        f"{result.name}, {result.scheduler}: {result.bound}/{result.pods} bound in {result.seconds:.1f}s "
        f"({result.pods_per_second:.0f} pods/s), first bind {result.first_bind:.1f}s after the process started"
    )


def ratio(results: Sequence[PhaseResult]) -> float | None:
    kai = [r for r in results if r.scheduler == KAI and not r.groups]
    kube = [r for r in results if r.scheduler == KUBE]
    if kai and kube and kube[0].pods_per_second > 0:
        return kai[0].pods_per_second / kube[0].pods_per_second
    return None


def report(results: Sequence[PhaseResult]) -> str:
    rows = []
    for r in results:
        cpu = r.cpu_seconds
        rows.append(
            [
                r.name,
                label(r),
                f"{r.bound}/{r.pods}",
                f"{r.seconds:.1f}",
                f"{r.pods_per_second:,.0f}",
                f"{r.first_bind:.1f}",
                f"{r.percentile(0.5):.1f}",
                f"{r.percentile(0.99):.1f}",
                f"{r.requests_per_second:,.0f}",
                " ".join(f"{k} {v:.0f}" for k, v in sorted(cpu.items())),
                f"{r.partial_gangs}/{r.groups}" if r.groups else "-",
            ]
        )
    text = format_table(
        [
            "workload",
            "scheduler",
            "bound",
            "seconds",
            "pods/s",
            "first bind after start s",
            "p50 s",
            "p99 s",
            "apiserver req/s",
            "CPU s over the window",
            "partial gangs",
        ],
        rows,
    )
    found = ratio(results)
    if found is not None:
        text += f"\nkai-ray / kube-scheduler pods/s: {found:.2f}x"
    starts = [f"{label(r)} {r.first_bind:.2f}s ({r.name})" for r in results if r.bound]
    if starts:
        text += "\nfirst bind after the process started, as the watch saw it: " + ", ".join(starts)
    for r in results:
        if r.startup is not None:
            text += f"\n{r.name} (kai-ray) start-up, its log: first bind answered {r.startup[0]:.2f}s; {r.startup[1]}"
    window = [r for r in results if r.seconds > 0]
    for r in window:
        busy = {k: v / r.seconds for k, v in r.cpu_seconds.items()}
        text += f"\n{r.name} ({label(r)}): cores busy on average - " + ", ".join(
            f"{k} {v:.2f}" for k, v in sorted(busy.items())
        )
    for r in results:
        if r.requests_by_kind and r.bound:
            text += f"\n{r.name} ({label(r)}): apiserver requests per bound pod - " + per_pod_requests(
                r.requests_by_kind, r.bound
            )
    for r in results:
        if r.steps:
            text += f"\n{r.name} (kai-ray) loop steps, count / seconds: " + ", ".join(
                f"{step} {count} / {seconds:.1f}" for step, (count, seconds) in sorted(r.steps.items())
            )
    return text


def label(result: PhaseResult) -> str:
    return "kai-ray" if result.scheduler == KAI else "kube-scheduler"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"the reduced sizes CI runs: {QUICK}")
    parser.add_argument("--mode", choices=MODES, default="both", help="which mode to run (default: both)")
    parser.add_argument("--nodes", type=int, help="nodes, in both modes")
    parser.add_argument("--pods", type=int, help="single-GPU pods, in both modes")
    parser.add_argument("--gangs", type=int)
    parser.add_argument("--batch", type=int, default=BATCH, help=f"arrivals: pods per batch (default {BATCH})")
    parser.add_argument(
        "--arrival-rate", type=float, help="arrivals: pods/s to pace the batches at (default: as fast as accepted)"
    )
    parser.add_argument("--shards", type=int, help="kai-ray's shard actors (default: its config, auto)")
    parser.add_argument("--skip", action="append", default=[], choices=["kai-ray", "kube-scheduler", "gangs"])
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    if args.batch <= 0 or (args.arrival_rate is not None and args.arrival_rate <= 0):
        parser.error("--batch and --arrival-rate must be positive")
    size = chosen_size(QUICK if args.quick else FULL, args.nodes, args.pods, args.gangs)
    preloaded, arriving = phases(args.mode, args.skip)
    try:
        ensure_built()
    except (GoMissing, BuildFailed) as error:
        print(f"kwok_load: {error}", file=sys.stderr)
        return 2

    async def run_all() -> tuple[list[PhaseResult], list[ArrivalResult]]:
        first = await run_preloaded(size, args.shards, preloaded)
        return first, await run_arriving(size, args.shards, arriving, args.batch, args.arrival_rate)

    results, arrivals = asyncio.run(run_all())
    print("\n\n".join(text for text in (report(results) if results else "", arrivals_report(arrivals)) if text))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            rows = []
            for r in results:
                row = {k: v for k, v in vars(r).items() if k != "bind_times"}
                row.update(podsPerSecond=r.pods_per_second, p50=r.percentile(0.5), p99=r.percentile(0.99))
                rows.append(row)
            json.dump(
                {
                    "size": asdict(size),
                    "mode": args.mode,
                    "results": rows,
                    "ratio": ratio(results),
                    "arrivals": [a.to_json() for a in arrivals],
                    "arrivalsRatio": arrivals_ratio(arrivals),
                },
                out,
                indent=1,
            )
    failed = [
        f"{r.name} {r.scheduler}: {r.bound}/{r.pods} bound, {r.partial_gangs} partial, {r.errors}"
        for r in results
        if r.bound < r.pods or r.partial_gangs or r.errors
    ]
    failed += [
        f"{a.name} {a.scheduler}: {a.bound}/{a.pods} bound, {a.errors}"
        for a in arrivals
        if a.bound < a.pods or a.errors
    ]
    for line in failed:
        print(f"FAILED {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
