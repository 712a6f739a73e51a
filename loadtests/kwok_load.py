"""The kwok load test on a real control plane, kai-ray side by side with kube-scheduler.

    python -m loadtests.kwok_load                  # 5,000 nodes, 10,000 pods, 1,000 gangs x 8
    python -m loadtests.kwok_load --quick          # the reduced size CI runs
    python -m loadtests.kwok_load --json kwok.json

Three phases, each on a fresh cluster (etcd + kube-apiserver + kwok, built from their Go
modules by realcluster/), with the nodes and pods created before any scheduler starts:

1. kai-ray: N kwok GPU nodes (the simulator's pools, tainted as kwok's), P single-GPU pods.
2. kube-scheduler of the same Kubernetes release: the same nodes and pods, with its scheduler name.
3. kai-ray alone: G gangs of 8 single-GPU pods, each a PodGroup with minMember 8.

Time runs from the scheduler's process start until a watch opened beforehand has seen every pod
bound. Both schedulers use the admin identity (exempt from API priority and fairness alike);
kube-scheduler's client rate limit is raised from its default 50/s to 5,000/s so that it is not
throttled by its own client. The report gives pods/s, kai-ray's ratio to kube-scheduler,
p50/p99 time to bind, the apiserver's request rate and its requests per bound pod by verb and
resource, and each process's CPU over the window.
Exit code 1 when a pod stayed unbound or a gang was left partial.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kai_ray.cli.output import format_table
from loadtests.kwok_phase import KAI, KUBE, NAMESPACE, PhaseResult, load_pod, run_phase
from realcluster.build import BuildFailed, GoMissing, ensure_built

PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
GROUPS = f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NAMESPACE}/podgroups"


@dataclass(frozen=True, slots=True)
class Size:
    nodes: int
    pods: int
    gangs: int
    gang_size: int = 8


FULL = Size(nodes=5_000, pods=10_000, gangs=1_000)
QUICK = Size(nodes=1_000, pods=2_000, gangs=200)


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


async def run_all(size: Size, shards: int | None, skip: Sequence[str]) -> list[PhaseResult]:
    results = []
    workload = f"{size.nodes} nodes / {size.pods} pods"
    if "kai-ray" not in skip:
        results.append(await run_phase(workload, KAI, size.nodes, single_pods(size.pods, KAI), {}, shards))
        print(row_text(results[-1]), file=sys.stderr)
    if "kube-scheduler" not in skip:
        results.append(await run_phase(workload, KUBE, size.nodes, single_pods(size.pods, KUBE), {}))
        print(row_text(results[-1]), file=sys.stderr)
    if "gangs" not in skip:
        items, sizes = gangs(size.gangs, size.gang_size)
        name = f"{size.nodes} nodes / {size.gangs} gangs x {size.gang_size}"
        results.append(await run_phase(name, KAI, size.nodes, items, sizes, shards))
        print(row_text(results[-1]), file=sys.stderr)
    return results


def row_text(result: PhaseResult) -> str:
    return (
        f"{result.name}, {result.scheduler}: {result.bound}/{result.pods} bound in {result.seconds:.1f}s "
        f"({result.pods_per_second:.0f} pods/s), first bind {result.first_bind:.1f}s"
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
                "kai-ray" if r.scheduler == KAI else "kube-scheduler",
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
            "first bind s",
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
    window = [r for r in results if r.seconds > 0]
    for r in window:
        busy = {k: v / r.seconds for k, v in r.cpu_seconds.items()}
        text += (
            f"\n{r.name} ({'kai-ray' if r.scheduler == KAI else 'kube-scheduler'}): cores busy on average - "
            + ", ".join(f"{k} {v:.2f}" for k, v in sorted(busy.items()))
        )
    for r in results:
        if r.requests_by_kind and r.bound:
            top = list(r.requests_by_kind.items())[:6]
            who = "kai-ray" if r.scheduler == KAI else "kube-scheduler"
            text += (
                f"\n{r.name} ({who}): apiserver requests per bound pod - "
                + f"{sum(r.requests_by_kind.values()) / r.bound:.2f} in all; "
                + ", ".join(f"{kind} {count / r.bound:.2f}" for kind, count in top)
            )
    for r in results:
        if r.steps:
            text += f"\n{r.name} (kai-ray) loop steps, count / seconds: " + ", ".join(
                f"{step} {count} / {seconds:.1f}" for step, (count, seconds) in sorted(r.steps.items())
            )
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"the reduced size CI runs: {QUICK}")
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--pods", type=int)
    parser.add_argument("--gangs", type=int)
    parser.add_argument("--shards", type=int, help="kai-ray's shard actors (default: its config, auto)")
    parser.add_argument("--skip", action="append", default=[], choices=["kai-ray", "kube-scheduler", "gangs"])
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    size = Size(args.nodes or base.nodes, args.pods or base.pods, args.gangs or base.gangs)
    try:
        ensure_built()
    except (GoMissing, BuildFailed) as error:
        print(f"kwok_load: {error}", file=sys.stderr)
        return 2
    results = asyncio.run(run_all(size, args.shards, args.skip))
    print(report(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            rows = []
            for r in results:
                row = {k: v for k, v in vars(r).items() if k != "bind_times"}
                row.update(podsPerSecond=r.pods_per_second, p50=r.percentile(0.5), p99=r.percentile(0.99))
                rows.append(row)
            json.dump(
                {
                    "size": vars(size) if hasattr(size, "__dict__") else size.__repr__(),
                    "results": rows,
                    "ratio": ratio(results),
                },
                out,
                indent=1,
            )
    failed = [r for r in results if r.bound < r.pods or r.partial_gangs or r.errors]
    for r in failed:
        print(
            f"FAILED {r.name} {r.scheduler}: {r.bound}/{r.pods} bound, {r.partial_gangs} partial, {r.errors}",
            file=sys.stderr,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
