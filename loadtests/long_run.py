"""A long churn run through the live loop with Ray shard actors: does any process keep growing?

The dev cluster in a process of its own; kai-ray's scheduler loop with its coordinator and two
shard actors on a Ray instance of its own (what ``kai-ray run --shards 2`` runs); a driver that
keeps creating one-GPU jobs that finish after a few seconds (the dev cluster's kubelet ends them)
and deletes finished ones, so pods come and go for the whole run. Every ``--sample`` seconds it
records the resident memory of each process of the run: the dev cluster, this process (loop and
driver), Ray's ``gcs_server`` and ``raylet``, and Ray's workers (the coordinator and shard
actors). At the end it prints the samples per process and the growth over each half of the run:
a process whose second half grows as much as its first is not bounded.

    python -m loadtests.long_run --minutes 60             # the hour the issue asks for
    python -m loadtests.long_run --minutes 3 --sample 20  # a smoke run
    python -m loadtests.long_run --minutes 20 --trace 4   # where this process's memory goes
    python -m loadtests.long_run --minutes 20 --trace 4 --shards 0  # ... with the coordinator and shard in it

Each process's resident memory is also split into its anonymous pages (heap, stacks, buffers: what
a leak grows) and its file-backed ones (code and data of the interpreter, Ray's native library and
the extension modules, paged in as code paths are first run, and bounded by those files' sizes):
the rows ending in ``[anon]`` and ``[file]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from k8s_adapter.api import KubeApi
from kai_ray.app.runtime import make_coordinator
from kai_ray.config import SchedulerConfig
from loadtests.dev_cluster_run import dev_cluster, scheduling
from loadtests.devcluster_storm import QUEUES, queue_object
from loadtests.kwok_driver import NAMESPACE, job_objects
from loadtests.memory_trace import MemoryTrace, trim_heap

JOB_SECONDS = 5  # the dev cluster's kubelet ends each job's pod this long after it starts


@dataclass
class Samples:
    started: float = field(default_factory=time.monotonic)
    rss_mib: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))
    created: int = 0
    deleted: int = 0

    def take(self, processes: dict[str, list[psutil.Process]]) -> None:
        at = (time.monotonic() - self.started) / 60
        for name, members in processes.items():
            total = anonymous = 0
            for process in members:
                try:
                    total += process.memory_info().rss
                    anonymous += _anonymous_bytes(process.pid)
                except (psutil.Error, OSError):
                    continue
            self.rss_mib[name].append((at, total / 2**20))
            if anonymous:
                self.rss_mib[f"{name} [anon]"].append((at, anonymous / 2**20))
                self.rss_mib[f"{name} [file]"].append((at, (total - anonymous) / 2**20))

    def report(self) -> str:
        lines = [f"jobs created {self.created:,}, deleted {self.deleted:,}"]
        lines.append(f"{'process':<34} {'start':>8} {'half':>8} {'end':>8} {'1st half':>9} {'2nd half':>9}  MiB")
        for name, series in sorted(self.rss_mib.items()):
            if len(series) < 3:
                continue
            start, middle, end = series[0][1], series[len(series) // 2][1], series[-1][1]
            lines.append(
                f"{name:<34} {start:8.1f} {middle:8.1f} {end:8.1f} {middle - start:+9.1f} {end - middle:+9.1f}"
            )
        return "\n".join(lines)


def _anonymous_bytes(pid: int) -> int:
    """The process's resident anonymous memory (Linux's ``smaps_rollup``; 0 where there is none)."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except FileNotFoundError:
        return 0
    for line in rollup.splitlines():
        if line.startswith("Anonymous:"):
            return int(line.split()[1]) * 1024
    return 0


def _processes(dev_cluster_pid: int | None) -> dict[str, list[psutil.Process]]:
    """This run's processes by role: Ray's are this process's descendants."""
    me = psutil.Process()
    groups: dict[str, list[psutil.Process]] = defaultdict(list)
    groups["scheduler loop + driver"].append(me)
    if dev_cluster_pid is not None:
        groups["dev cluster"].append(psutil.Process(dev_cluster_pid))
    for child in me.children(recursive=True):
        try:
            command = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if child.pid == dev_cluster_pid:
            continue
        if "gcs_server" in command:
            groups["ray gcs_server"].append(child)
        elif "raylet" in command:
            groups["ray raylet"].append(child)
        elif "ray::" in command or "default_worker.py" in command:
            groups["ray workers (actors)"].append(child)
            groups[_actor_role(command)].append(child)
        else:
            groups["ray other"].append(child)
    return groups


def _actor_role(command: str) -> str:
    """Which of kai-ray's actors a Ray worker is, from the title Ray gives its process."""
    if "ShardActor" in command:
        return "ray shard actors"
    if "CoordinatorHost" in command:
        return "ray coordinator actor"
    return "ray other workers"


async def _churn(api: KubeApi, samples: Samples, until: float, jobs_per_second: float) -> None:
    index = 0
    while time.monotonic() < until:
        name = f"churn-{index:07d}"
        index += 1
        for path, obj in job_objects(name, "churn", 1, 1, JOB_SECONDS, tolerate_kwok=False):
            await api.request("POST", path, body=obj)
        samples.created += 1
        if index % 20 == 0:
            answer = await api.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")
            for pod in answer.body.get("items", ()):
                if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                    pod_name = pod["metadata"]["name"]
                    await api.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{pod_name}")
                    group = pod["metadata"].get("annotations", {}).get("pod-group-name")
                    if group:
                        await api.request(
                            "DELETE", f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NAMESPACE}/podgroups/{group}"
                        )
                    samples.deleted += 1
        await asyncio.sleep(1 / jobs_per_second)


async def run(
    minutes: float,
    sample_seconds: float,
    nodes: int,
    jobs_per_second: float,
    trace: MemoryTrace | None = None,
    trim: bool = False,
    shards: int = 2,
) -> Samples:
    config = SchedulerConfig().for_live_loop()
    samples = Samples()
    next_trace = time.monotonic() + 2 * sample_seconds  # tracing starts once Ray and the loop are warm
    async with (
        dev_cluster(nodes) as kubeconfig,
        scheduling(kubeconfig, config.schedulerName, lambda n: make_coordinator(config, n, shards), 1.0) as (api, _),
    ):
        await api.request("POST", QUEUES, body=queue_object("churn", None, -1))
        server = [p for p in psutil.Process().children() if "dev-cluster" in " ".join(p.cmdline())]
        server_pid = server[0].pid if server else None
        until = time.monotonic() + minutes * 60
        churn = asyncio.create_task(_churn(api, samples, until, jobs_per_second))
        while time.monotonic() < until:
            await asyncio.sleep(sample_seconds)  # the first sample once Ray and the actors are up
            if trim:
                print(f"malloc_trim gave back {trim_heap():.1f} MiB of this process", flush=True)
            samples.take(_processes(server_pid))
            print(json.dumps({k: round(v[-1][1], 1) for k, v in samples.rss_mib.items()}), flush=True)
            if trace is not None and time.monotonic() >= next_trace:
                if not trace.snapshots:
                    trace.start()
                next_trace = time.monotonic() + trace.every_seconds
                print(f"{trace.line(trace.take())}, jobs created {samples.created:,}", flush=True)
        await churn
        samples.take(_processes(server_pid))
        if trace is not None:
            trace.take()
    return samples


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--sample", type=float, default=60.0, help="seconds between memory samples")
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--rate", type=float, default=5.0, help="jobs created per second")
    parser.add_argument(
        "--shards",
        type=int,
        default=2,
        help="shard actors (0: the coordinator and one shard in this process, where --trace sees them)",
    )
    parser.add_argument("--out", type=Path, help="write the samples as JSON here")
    parser.add_argument(
        "--trace",
        type=float,
        metavar="MINUTES",
        help="trace this process's allocations (slower): a snapshot every MINUTES, and at the end what grew "
        "between the second snapshot and the last, the driver's apart from the loop's",
    )
    parser.add_argument(
        "--trim",
        action="store_true",
        help="before each sample, give this process's free C-heap pages back (glibc's malloc_trim): "
        "what it gives back grew as allocator free lists, not as objects kept",
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    trace = None
    if args.trace:
        trace = MemoryTrace(args.trace * 60, driver=[_churn, Samples.take])
    samples = asyncio.run(run(args.minutes, args.sample, args.nodes, args.rate, trace, args.trim, args.shards))
    print(samples.report())
    if trace is not None:
        print(trace.report())
    if args.out:
        args.out.write_text(json.dumps({k: v for k, v in samples.rss_mib.items()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
