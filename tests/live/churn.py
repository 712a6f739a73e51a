"""Seeded churn against the dev cluster while ``kai-ray run``'s loop schedules it.

One seed is one run: a dev cluster whose kubelet runs on a manual clock, the real scheduler loop
(two in-process shards) watching it over HTTP, and rounds of random changes: jobs created (gangs,
single and multi-GPU pods, fractions, CPU pods, pods for the pod grouper), pods completing,
failing and deleted, nodes added, cordoned, NotReady, deleted and registered again, queues
changed and removed, foreign pods, and bind, eviction and watch faults. After each round the
faults are cleared, the clock stops, and once the scheduler is quiet its view is compared with a
fresh from-scratch session (``views.compare``) and the invariants are checked. Every cycle is
checked for partial gangs, every bind for a pod bound twice.

    python -m tests.live.churn --seeds 100 --rounds 6       # the long run (see tests/live/README.md)
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from prometheus_client import CollectorRegistry

from coordinator.coordinator import Coordinator, CycleResult
from devcluster import DevCluster
from devcluster.clock import ManualClock
from k8s_adapter.api import KubeApi, connect
from k8s_adapter.binder import BindBackoff, BindOutcome, BindRequest
from k8s_adapter.cache import ClusterCache
from k8s_adapter.gpu_sharing import ReservationSettings
from k8s_adapter.leader import Leadership
from k8s_adapter.runner import SchedulerLoop
from kai_ray import labels as L
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.app.sim.cluster import synthetic_nodes
from kai_ray.config import SchedulerConfig
from kai_ray.deltas import ClusterDeltas
from tests.live import ops
from tests.live.views import KINDS, Obj, compare, overcommitted

CONFIG = {"kValue": 0, "victimSearchBackoff": "0s", "defaultStalenessGracePeriod": "1h"}
CHURN_CONFIG = SchedulerConfig.model_validate(CONFIG)
QUIET_CYCLES = 4


@dataclass
class Findings:
    seed: int
    problems: list[str] = field(default_factory=list)
    quiet_points: int = 0
    cycles: int = 0
    binds: int = 0
    ops: int = 0

    def add(self, where: str, found: Sequence[str]) -> None:
        self.problems.extend(f"{where}: {line}" for line in found)

    def quiet_point(self, differences: Sequence[str], objects: dict[str, list[Obj]]) -> None:
        """A quiet point compared: its differences, and the over-commit the objects show."""
        self.quiet_points += 1
        self.add(f"quiet point {self.quiet_points}", differences)
        self.add(f"quiet point {self.quiet_points} over-commit", overcommitted(objects))


class Rounds(Protocol):
    findings: Findings

    async def round(self, steps: int) -> None: ...

    async def quiet_point(self) -> None: ...


async def drive(churn: Rounds, loop: SchedulerLoop, rounds: int, steps: int) -> None:
    """Rounds of changes, each ending in a quiet point, while ``loop`` runs; the first round that
    finds a difference is the last."""
    task = asyncio.create_task(loop.run())
    try:
        for _ in range(rounds):
            await churn.round(steps)
            await churn.quiet_point()
            if churn.findings.problems:
                break
    finally:
        loop.stop()
        await asyncio.wait_for(task, 30)


class Recorder:
    """The coordinator as the loop sees it, checking every cycle for partial gangs."""

    def __init__(self, coordinator: Coordinator, cache: ClusterCache, findings: Findings) -> None:
        self.coordinator = coordinator
        self.cache = cache
        self.findings = findings
        self.last: CycleResult | None = None
        self.active_cycles = 0  # the cycle count when something last moved
        self.unseen = False  # changes applied that no cycle has seen yet

    def apply(self, deltas: ClusterDeltas) -> None:
        self.coordinator.apply(deltas)
        self.unseen = self.unseen or bool(deltas)

    def bind_failed(self, pods: list[str]) -> None:
        self.coordinator.bind_failed(pods)

    def cycle(self, now: float) -> CycleResult:
        result = self.coordinator.cycle(now)
        self.last = result
        self.unseen = False
        self.findings.cycles += 1
        if result.binds or result.evictions:
            self.active_cycles = self.findings.cycles
        decided = result.decisions.pods
        groups = self.coordinator.model.pod_groups
        by_group: dict[str, list[str]] = {}
        for key, pod in self.coordinator.model.pods.items():
            if pod.pod_group:
                by_group.setdefault(f"{pod.namespace}/{pod.pod_group}", []).append(key)
        for job in {
            f"{p.namespace}/{p.pod_group}" for b in result.binds if (p := self.coordinator.model.pods.get(b.pod))
        }:
            placed = sum(1 for k in by_group.get(job, []) if decided.get(k) and decided[k].status in PLACED)
            group = groups.get(job)
            if group is not None and placed < group.min_member:
                self.findings.problems.append(
                    f"cycle {self.findings.cycles}: {job} bound {placed} of {group.min_member}"
                )
        return result


PLACED = ("Running", "Binding", "Pipelined")


class Churn:
    def __init__(self, seed: int, workdir: Path) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.workdir = workdir
        self.findings = Findings(seed)
        self.clock = ManualClock()
        pool = synthetic_nodes(10)
        self.cluster = DevCluster(
            nodes=pool[:6], clock=self.clock, start_delay=0.5, max_grace=1.0, bookmark_seconds=0.5
        )
        self.ops = ops.Ops(self.cluster, self.clock, pool[6:])
        self.config, self.config_path = CHURN_CONFIG, write_config(workdir)
        self.recorder: Recorder | None = None
        self.api: KubeApi | None = None
        self.loop: SchedulerLoop | None = None

    # ------------------------------------------------------------------ setup
    def _recorded(self, recorder: Recorder) -> None:
        self.recorder = recorder

    async def start(self) -> None:
        await self.cluster.start()
        self.api = await connect(str(self.cluster.write_kubeconfig(self.workdir / "kubeconfig")))
        ops.seed_objects(self.cluster)
        self.loop = churn_loop(
            self.api, self.findings, self._recorded, period=0.03, reservations=ReservationSettings(timeout=2.0)
        )

    async def reservation_kubelet(self) -> None:
        """Start GPU reservation pods as soon as they are bound. The binder of a fraction waits for
        its reservation pod to run and report its GPU (KAI's binder does the same); the churn's
        kubelet clock otherwise moves only in rounds, so at a quiet point such a bind would wait
        for its timeout. The clock moves just enough for the pod to start, once per pod: one on a node
        that is gone or not ready never starts, and its bind fails after the (shortened) timeout."""
        simulator = self.cluster.simulator
        assert simulator is not None
        started: set[str] = set()
        while True:
            waiting = [
                p["metadata"]["uid"]
                for p in self.cluster.objects("", "v1", "pods", L.RESERVATION_NAMESPACE)
                if p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") != "Running"
            ]
            if set(waiting) - started:
                started.update(waiting)
                self.clock.advance(simulator.start_delay + 0.05)
                simulator.step()
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        if self.api is not None:
            await self.api.close()
        await self.cluster.stop()

    # ------------------------------------------------------------------ rounds
    async def round(self, steps: int) -> None:
        """Random changes while the scheduler runs, the kubelet's clock moving now and then."""
        for _ in range(steps):
            ops.random_op(self.rng, self.ops)
            self.findings.ops += 1
            await asyncio.sleep(self.rng.choice((0.0, 0.01, 0.03, 0.08)))

    def _objects(self) -> dict[str, list[dict[str, Any]]]:
        return {kind: self.cluster.objects(group, version, plural) for group, version, plural, kind in KINDS}

    def _caught_up(self) -> bool:
        assert self.loop is not None
        return caught_up(self.loop, self._objects())

    def _not_quiet(self) -> list[str]:
        """What still moves (empty: quiet)."""
        assert self.loop is not None and self.recorder is not None
        return still_moving(self.loop, self.recorder, self._caught_up())

    async def quiet_point(self, timeout: float = 60.0) -> None:
        """Faults off, clock stopped; once nothing moves for a few cycles, compare and check."""
        self.cluster.faults.clear()
        loop, recorder = self.loop, self.recorder
        assert loop is not None and recorder is not None
        deadline = time.monotonic() + timeout
        while True:
            async with loop.steps.coordinator_lock:  # no cycle runs while quiet is judged and the view is read
                moving = self._not_quiet()
                if not moving:
                    assert recorder.last is not None
                    objects = self._objects()
                    found = compare(
                        recorder.coordinator, recorder.last, objects, self.config, self.config_path, self.workdir
                    )
                    break
            if time.monotonic() > deadline:
                self.findings.problems.append(f"the scheduler never became quiet: {'; '.join(moving)}")
                return
            await asyncio.sleep(0.03)
        self.findings.quiet_point(found, objects)


def write_config(workdir: Path) -> Path:
    """The churn's scheduler config as a file, for the from-scratch ``kai-ray schedule``."""
    path = workdir / "config.yaml"
    path.write_text("\n".join(f"{k}: {v}" for k, v in CONFIG.items()) + "\n")
    return path


def churn_loop(
    api: KubeApi, findings: Findings, recorded: Callable[[Recorder], None], period: float, **options: Any
) -> SchedulerLoop:
    """``kai-ray run``'s loop as the churn runs it: two in-process shards behind a ``Recorder``
    (handed to ``recorded`` once the loop makes it), fast retries, every bind checked."""
    cache = ClusterCache()

    def coordinator(_: int) -> Recorder:
        recorder = Recorder(in_process_coordinator(CHURN_CONFIG, shards=2), cache, findings)
        recorded(recorder)
        return recorder

    loop = SchedulerLoop(
        api,
        cache,
        coordinator,  # type: ignore[arg-type]
        CollectorRegistry(),
        Leadership(enabled=False),
        period=period,
        bind_backoff=BindBackoff(base=0.1, limit=0.5),
        **options,
    )
    loop.evictor.retry_after = 0.1
    loop.status.report_after = 0.0
    record_binds(loop, findings)
    return loop


def caught_up(loop: SchedulerLoop, objects: dict[str, list[Obj]]) -> bool:
    """The watches delivered every one of ``objects`` (by kind, as ``views.KINDS`` lists them) at
    its current version, and nothing else."""
    stored = {
        (
            kind,
            f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}" if namespaced else obj["metadata"]["name"],
        ): int(obj["metadata"]["resourceVersion"])
        for _, _, plural, kind in KINDS
        for namespaced in [plural in ("pods", "podgroups")]
        for obj in objects[kind]
    }
    return stored == loop.cache.versions_seen()


def record_binds(loop: SchedulerLoop, findings: Findings) -> None:
    """Check every bind the loop sends: none met a conflict, no pod (by uid) bound twice."""
    bind_all = loop.binder.bind_all
    bound: dict[str, str] = {}  # pod uid -> node, for every successful bind

    async def recorded(requests: Sequence[BindRequest]) -> list[BindOutcome]:
        outcomes = await bind_all(requests)
        for request, outcome in zip(requests, outcomes, strict=True):
            if outcome.reason.startswith("conflict"):
                findings.problems.append(f"bind of {request.pod} met a conflict: {outcome.reason}")
            if outcome.ok:
                if request.uid in bound:
                    findings.problems.append(f"{request.pod} (uid {request.uid}) bound twice")
                bound[request.uid] = request.node
                findings.binds += 1
        return outcomes

    loop.binder.bind_all = recorded  # type: ignore[method-assign]


def still_moving(loop: SchedulerLoop, recorder: Recorder, caught_up: bool) -> list[str]:
    """What still moves in the scheduler (empty: quiet); ``caught_up``: the watches delivered
    every object at its current version."""
    last = recorder.last
    checks = {
        f"the last cycle bound {len(last.binds) if last else 0} and evicted {len(last.evictions) if last else 0}": (
            recorder.findings.cycles - recorder.active_cycles >= QUIET_CYCLES
        ),
        "changes applied but not yet cycled": not recorder.unseen,
        f"in flight: {_where(_started(loop.steps.in_flight))}": not _started(loop.steps.in_flight),
        f"evictions waiting {sorted(loop.evictor.waiting)}": not loop.evictor.waiting,
        f"pods held back {sorted(loop.cache.held_view)}": not loop.cache.held_view,
        "watch events not yet taken": loop.cache.pending_events() == 0,
        f"{len(loop.cache.membership.ungrouped_view)} pods not grouped": not loop.cache.membership.ungrouped_view,
        "the watches have not delivered everything": caught_up,
    }
    moving = [what for what, fine in checks.items() if not fine]
    if moving and last is not None and last.evictions:
        now = {e.pod: loop.cache.pod_now(e.pod) for e in last.evictions}
        moving.append(f"evictions {[(e.pod, e.action, e.preemptor, now[e.pod]) for e in last.evictions]}")
    return moving


def _started(tasks: set[asyncio.Task[None]]) -> list[asyncio.Task[None]]:
    """Background tasks that began their work. The loop queues a bind and a status task after every
    cycle; one that has not run its first step yet holds nothing up (a cycle with binds is already
    counted as activity), and polling in step with the loop's period would otherwise always see one."""
    return [t for t in tasks if inspect.getcoroutinestate(t.get_coro()) != inspect.CORO_CREATED]  # type: ignore[arg-type]


def _where(tasks: list[asyncio.Task[None]]) -> str:
    """Where each background task waits (its chain of coroutines)."""
    places = []
    for task in tasks:
        chain, awaited = [], task.get_coro()
        while hasattr(awaited, "cr_frame") and awaited.cr_frame is not None:
            chain.append(f"{awaited.cr_frame.f_code.co_name}:{awaited.cr_frame.f_lineno}")
            awaited = awaited.cr_await
        places.append(" > ".join(chain) + f" awaiting {type(awaited).__name__}")
    return "; ".join(places)


async def run_seed(seed: int, rounds: int = 3, steps: int = 25) -> Findings:
    with tempfile.TemporaryDirectory(prefix=f"churn-{seed}-") as tmp:
        churn = Churn(seed, Path(tmp))
        await churn.start()
        assert churn.loop is not None
        kubelet = asyncio.create_task(churn.reservation_kubelet())
        try:
            await drive(churn, churn.loop, rounds, steps)
        finally:
            kubelet.cancel()
            await asyncio.gather(kubelet, return_exceptions=True)
            await churn.stop()
        return churn.findings


def report(findings: Findings) -> str:
    head = (
        f"seed {findings.seed}: {findings.ops} changes, {findings.quiet_points} quiet points, "
        f"{findings.cycles} cycles, {findings.binds} binds"
    )
    if not findings.problems:
        return head + ", no difference"
    shown = "\n  ".join(findings.problems[:20])
    again = f"python -m tests.live.churn --seed {findings.seed}"
    return f"{head}, {len(findings.problems)} differences (again: {again}):\n  {shown}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.live.churn", description=__doc__)
    parser.add_argument("--seeds", type=int, default=20, help="how many seeds, from --first")
    parser.add_argument("--first", type=int, default=1000)
    parser.add_argument("--seed", type=int, help="run this one seed only")
    parser.add_argument("--rounds", type=int, default=6, help="rounds of changes (each ends in a quiet point)")
    parser.add_argument("--steps", type=int, default=30, help="changes per round")
    args = parser.parse_args(argv)
    seeds = [args.seed] if args.seed is not None else list(range(args.first, args.first + args.seeds))
    started, failed = time.monotonic(), 0
    for seed in seeds:
        findings = asyncio.run(run_seed(seed, args.rounds, args.steps))
        failed += bool(findings.problems)
        print(report(findings), flush=True)
    print(f"{len(seeds)} seeds, {failed} with differences, {(time.monotonic() - started) / 60:.1f} minutes")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
