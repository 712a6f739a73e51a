"""The kwok load test's arrivals mode: pods created in batches while the scheduler runs.

Each scheduler starts on a fresh cluster holding only the nodes (kai-ray at ``kai-ray run``'s
defaults: the pod grouper on, so every bare pod gets a PodGroup of one before it is scheduled).
Once it has bound a probe pod (its watches are synced and its loop turns; not timed), the load
test creates P single-GPU bare pods in batches of B, each batch created concurrently through the
API as a user's ``kubectl create`` of a few hundred objects would be. By default each batch
starts as soon as the apiserver has accepted the previous one (as fast as it accepts, sharing the
machine with the scheduler); with a rate, batch i starts ``i * B / rate`` seconds after the first
create, or as soon as the previous batch is accepted if that is later.

Time runs from the first create until a watch opened before the scheduler started has seen every
pod with a node. The apiserver's request counter, each process's CPU and kai-ray's loop-step
histograms are read at both ends of that window; kai-ray's log over the window is read for its
cycle summaries and for the iterations the loop reports as long.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from k8s_adapter.api import KubeApi, connect
from kai_ray.app.cli.output import format_table
from loadtests.kwok_driver import percentile
from loadtests.kwok_phase import (
    KAI,
    KUBE,
    NAMESPACE,
    Watch,
    create_all,
    load_cluster,
    load_pod,
    populate,
    scheduler_command,
    scheduler_log,
    start_scheduler,
    stop_scheduler,
)
from loadtests.kwok_readings import (
    apiserver_requests,
    cpu_seconds,
    kai_ray_iterations,
    kai_ray_steps,
    per_pod_requests,
    request_delta,
)
from loadtests.scheduler_log import (
    LogFacts,
    iteration_text,
    log_json,
    longest_in_window,
    parse_scheduler_log,
    step_delta,
)
from realcluster.cluster import RealCluster, free_port

PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
BATCH = 250  # pods per batch: a `kubectl create -f` of a few hundred objects
PROBE = "arrivals-probe"
READY_TIMEOUT = 300.0  # scheduler start -> probe bound (kai-ray starts Ray; a loaded machine is slow)


@dataclass(frozen=True, slots=True)
class Batch:
    start: float  # seconds after the first create before which this batch does not start
    first: int  # index of its first pod
    count: int


def batch_plan(pods: int, batch: int, rate: float | None = None) -> list[Batch]:
    """The batches ``pods`` pods are created in: ``batch`` each (the last one the rest). Without a
    rate every batch may start at 0 (each waits only for the previous one to be accepted)."""
    if batch <= 0:
        raise ValueError(f"batch must be positive, not {batch}")
    if rate is not None and rate <= 0:
        raise ValueError(f"rate must be positive, not {rate}")
    return [
        Batch(start=first / rate if rate else 0.0, first=first, count=min(batch, pods - first))
        for first in range(0, max(pods, 0), batch)
    ]


def arrival_pods(count: int, scheduler: str) -> list[tuple[str, dict[str, Any]]]:
    return [(PODS, load_pod(f"arrive-{i:05d}", scheduler)) for i in range(count)]


@dataclass
class ArrivalResult:
    name: str
    scheduler: str
    nodes: int
    pods: int
    bound: int
    created_in: float  # first create -> last pod accepted by the apiserver
    all_bound_at: float  # first create -> last pod seen bound (the window's end if some never were)
    batch: int
    rate: float | None  # pods/s the batches were paced at; None: as fast as the apiserver accepts
    latencies: list[float] = field(default_factory=list)  # per pod, accepted -> seen bound
    ready_seconds: float = 0.0  # scheduler start -> probe pod bound (not in the window)
    requests_by_kind: dict[str, int] = field(default_factory=dict)  # over the window, the creates included
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # per process over the window
    steps: dict[str, tuple[int, float]] = field(default_factory=dict)  # kai-ray loop step -> (count, s)
    log: LogFacts | None = None  # kai-ray's log over the window
    longest_iteration: tuple[float, bool] | None = None  # kai-ray's metrics: seconds, exact (else a bound)
    # From the window's start until the scheduler's writes that trail its binds (events, status,
    # PodGroups) have settled: what the pods cost in all, whatever was left until after the window.
    settled_requests: dict[str, int] = field(default_factory=dict)
    settled_after: float = 0.0  # seconds after the window's end the requests settled
    errors: list[str] = field(default_factory=list)

    @property
    def after_last_create(self) -> float:
        return self.all_bound_at - self.created_in

    @property
    def pods_per_second(self) -> float:
        return self.bound / self.all_bound_at if self.all_bound_at > 0 else 0.0

    def latency(self, q: float) -> float:
        return percentile(self.latencies, q)

    def to_json(self) -> dict[str, Any]:
        row = {k: v for k, v in vars(self).items() if k not in ("latencies", "log")}
        row.update(
            afterLastCreate=self.after_last_create,
            podsPerSecond=self.pods_per_second,
            latencyP50=self.latency(0.5),
            latencyP99=self.latency(0.99),
            log=None if self.log is None else {**log_json(self.log), "longestIteration": self.log.longest_iteration},
        )
        return row


def who(scheduler: str) -> str:
    return "kai-ray" if scheduler == KAI else "kube-scheduler"


def arrivals_ratio(results: Sequence[ArrivalResult]) -> float | None:
    kai = [r for r in results if r.scheduler == KAI]
    kube = [r for r in results if r.scheduler == KUBE]
    if kai and kube and kube[0].pods_per_second > 0:
        return kai[0].pods_per_second / kube[0].pods_per_second
    return None


def arrival_rows(results: Sequence[ArrivalResult]) -> list[list[str]]:
    rows = []
    for r in results:
        rows.append(
            [
                r.name,
                who(r.scheduler),
                f"{r.bound}/{r.pods}",
                f"{r.created_in:.1f}",
                f"{r.all_bound_at:.1f}",
                f"{r.after_last_create:.1f}",
                f"{r.pods_per_second:,.1f}",
                f"{r.latency(0.5):.1f}",
                f"{r.latency(0.99):.1f}",
                " ".join(f"{k} {v:.0f}" for k, v in sorted(r.cpu_seconds.items())),
                iteration_text(r.longest_iteration, r.log),
            ]
        )
    return rows


def arrivals_report(results: Sequence[ArrivalResult]) -> str:
    if not results:
        return ""
    pace = {"as fast as the apiserver accepts" if r.rate is None else f"{r.rate:g} pods/s" for r in results}
    text = f"Arrivals: pods created while the scheduler runs, batches of {results[0].batch}, {', '.join(pace)}\n"
    text += format_table(
        [
            "workload",
            "scheduler",
            "bound",
            "created in s",
            "all bound at s",
            "after last create s",
            "pods/s",
            "p50 create->bind s",
            "p99 s",
            "CPU s over the window",
            "longest iteration s",
        ],
        arrival_rows(results),
    )
    found = arrivals_ratio(results)
    if found is not None:
        text += f"\narrivals, kai-ray / kube-scheduler pods/s: {found:.2f}x"
    for r in results:
        if r.requests_by_kind and r.bound:
            text += (
                f"\n{r.name} ({who(r.scheduler)}), arrivals: apiserver requests per bound pod (the creates included) - "
            )
            text += per_pod_requests(r.requests_by_kind, r.bound, top=8)
        if r.settled_requests and r.bound:
            text += (
                f"\n{r.name} ({who(r.scheduler)}), arrivals: the same once its writes settled, "
                f"{r.settled_after:.0f} s after the window - "
            )
            text += per_pod_requests(r.settled_requests, r.bound, top=8)
    for r in results:
        if r.steps:
            text += f"\n{r.name} (kai-ray), arrivals: loop steps over the window, count / seconds: " + ", ".join(
                f"{step} {count} / {seconds:.1f}" for step, (count, seconds) in sorted(r.steps.items())
            )
        if r.log is not None:
            facts = r.log
            text += (
                f"\n{r.name} (kai-ray), arrivals, from its log: {facts.cycles} busy cycles, {facts.cycle_seconds:.1f} s"
                f" together, longest {facts.longest_cycle:.2f} s, {facts.cycle_binds} pods given a node; "
                f"{len(facts.long_iterations)} iterations over 10 s; {facts.grouping_retries} pods not grouped at once"
            )
    return text


SETTLE_EVERY = 3.0  # seconds between readings while waiting for the requests to settle
SETTLE_LIMIT = 180.0


async def settle(cluster: RealCluster, last: dict[str, float], pods: int) -> tuple[dict[str, float], float]:
    """The apiserver's request counts once a reading ``SETTLE_EVERY`` seconds after the previous
    one adds fewer than ``max(20, pods / 500)`` requests (leases and kwok's own go on), and how
    long after ``last`` that was (at most ``SETTLE_LIMIT``)."""
    began = time.monotonic()
    if not last:
        return {}, 0.0
    while time.monotonic() - began < SETTLE_LIMIT:
        await asyncio.sleep(SETTLE_EVERY)
        now = await asyncio.to_thread(apiserver_requests, cluster)
        if not now:
            return {}, 0.0
        if sum(now.values()) - sum(last.values()) < max(20, pods / 500):
            return now, time.monotonic() - began - SETTLE_EVERY
        last = now
    return last, time.monotonic() - began


async def create_batches(
    api: KubeApi,
    pods: Sequence[tuple[str, dict[str, Any]]],
    plan: Sequence[Batch],
    created: dict[str, float],
    errors: list[str],
) -> None:
    """Each batch of the plan in turn, not before its start; its pods concurrently."""
    began = time.monotonic()
    for batch in plan:
        delay = began + batch.start - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        await create_all(api, pods[batch.first : batch.first + batch.count], errors, created)


async def run_arrivals(
    name: str,
    scheduler: str,
    nodes: int,
    pods: Sequence[tuple[str, dict[str, Any]]],
    batch: int = BATCH,
    rate: float | None = None,
    shards: int | None = None,
    timeout: float = 900.0,
) -> ArrivalResult:
    """A fresh cluster with ``nodes`` nodes, ``scheduler`` started on it, then ``pods`` created in
    batches while it runs; timed from the first create until every pod is seen bound."""
    plan = batch_plan(len(pods), batch, rate)
    cluster = load_cluster()
    await asyncio.to_thread(cluster.start)
    process = None
    errors: list[str] = []
    try:
        api = await connect(str(cluster.kubeconfig("admin")))
        try:
            began = time.monotonic()
            await populate(api, nodes, [], errors)
            print(f"{name}, {scheduler}: {nodes} nodes created in {time.monotonic() - began:.1f}s", file=sys.stderr)
            if errors:
                raise RuntimeError(f"populating the cluster failed ({len(errors)} errors), first: {errors[0]}")
            watch = Watch(api)
            await watch.start()
            watching = asyncio.create_task(watch.run())
            metrics_port = free_port()
            launched = time.monotonic()
            process = start_scheduler(
                cluster, scheduler_command(cluster, scheduler, shards, metrics_port, as_chart=False)
            )
            await create_all(api, [(PODS, load_pod(PROBE, scheduler))], errors)
            while PROBE not in watch.bound_at and not errors:
                if process.poll() is not None:
                    errors.append(f"{scheduler} exited with {process.returncode} before binding the probe pod")
                elif time.monotonic() - launched > READY_TIMEOUT:
                    errors.append(f"{scheduler} did not bind the probe pod within {READY_TIMEOUT:.0f}s")
                await asyncio.sleep(0.1)
            ready = time.monotonic() - launched
            if errors:  # a scheduler that never binds: a failed row, and the other scheduler still runs
                watching.cancel()
                return ArrivalResult(name, scheduler, nodes, len(pods), 0, 0.0, 0.0, batch, rate, errors=errors[:10])
            print(f"{name}, {scheduler}: bound the probe pod {ready:.1f}s after its start", file=sys.stderr)

            requests_before = await asyncio.to_thread(apiserver_requests, cluster)
            pids = {**cluster.pids(), "driver": os.getpid(), "scheduler": process.pid}
            cpu_before = cpu_seconds(pids)
            steps_before = await asyncio.to_thread(kai_ray_steps, metrics_port) if scheduler == KAI else {}
            iterations_before = await asyncio.to_thread(kai_ray_iterations, metrics_port) if scheduler == KAI else None
            log_path = scheduler_log(cluster)
            log_from = log_path.stat().st_size
            created: dict[str, float] = {}
            names = [obj["metadata"]["name"] for _, obj in pods]
            first_create = time.monotonic()
            await create_batches(api, pods, plan, created, errors)
            while sum(1 for n in names if n in watch.bound_at) < len(names):
                if process.poll() is not None:
                    errors.append(f"{scheduler} exited with {process.returncode}")
                    break
                if time.monotonic() - first_create > timeout:
                    break
                await asyncio.sleep(0.1)
            window = time.monotonic() - first_create
            cpu_after = cpu_seconds(pids)
            steps_after = await asyncio.to_thread(kai_ray_steps, metrics_port) if scheduler == KAI else {}
            iterations_after = await asyncio.to_thread(kai_ray_iterations, metrics_port) if scheduler == KAI else None
            requests_after = await asyncio.to_thread(apiserver_requests, cluster)
            watching.cancel()
            settled, settled_after = await settle(cluster, requests_after, len(names))
            facts = None
            if scheduler == KAI:
                with log_path.open("rb") as log:
                    log.seek(log_from)
                    facts = parse_scheduler_log(log.read().decode(errors="replace"))
            bound = {n: watch.bound_at[n] for n in names if n in watch.bound_at}
            return ArrivalResult(
                name=name,
                scheduler=scheduler,
                nodes=nodes,
                pods=len(names),
                bound=len(bound),
                created_in=max(created.values(), default=first_create) - first_create,
                all_bound_at=max(bound.values()) - first_create if len(bound) == len(names) and bound else window,
                batch=batch,
                rate=rate,
                latencies=[at - created[n] for n, at in bound.items() if n in created],
                ready_seconds=ready,
                requests_by_kind=request_delta(requests_before, requests_after) if requests_before else {},
                settled_requests=request_delta(requests_before, settled) if requests_before and settled else {},
                settled_after=settled_after,
                cpu_seconds={k: round(cpu_after.get(k, 0.0) - cpu_before.get(k, 0.0), 1) for k in pids},
                steps=step_delta(steps_before, steps_after),
                log=facts,
                longest_iteration=(
                    longest_in_window(iterations_before, iterations_after)
                    if iterations_before is not None and iterations_after is not None
                    else None
                ),
                errors=(errors + watch.errors)[:10],
            )
        finally:
            await api.close()
    finally:
        stop_scheduler(process)
        await asyncio.to_thread(cluster.stop)
