"""Reservations on a starving workload: the ``starved-gang`` scenario (``kai_ray/app/sim/starved_gang.py``)
simulated with and without ``reservation`` in the config, every seed in the same process, on the
same workload per seed (docs/reservation-backfill.md, docs/performance.md).

Per run: when the gang started after it arrived (or that it had not by the end, with its pending
reason), how often it lost its run again (evicted below its minimum) and when it finished, the
cluster's GPU utilization time-averaged over the whole run and from the gang's arrival on, the
small jobs started, their waits from arrival to start (p50 and p90 of those that
started, and how many still wait at the end), evictions and session p50 / p99.

    python -m loadtests.starved_gang                       # 1,000 nodes, 512-pod gang, seeds 1-3
    python -m loadtests.starved_gang --quick               # 80 nodes, a 64-pod gang, one seed
    python -m loadtests.starved_gang --after off 10m 30m --seeds 1 2 3 --json out.json
    python -m loadtests.starved_gang --nodes 250 --gang-pods 128 --seeds 1
    python -m loadtests.starved_gang --non-preemptible-gang   # a gang reclaim cannot take once up
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from kai_ray.app.cli.output import format_table
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.app.sim import scenarios
from kai_ray.app.sim.engine import InProcess, SimSettings, Simulation
from kai_ray.app.sim.starved_gang import StarvedGang, gang
from kai_ray.config import SchedulerConfig

FULL = StarvedGang()
QUICK = StarvedGang(nodes=80, gang_pods=64)
MIN_PODS = 128  # only gangs this large reserve, as the docs advise on a busy cluster (or the gang's size, if smaller)


@dataclass(frozen=True, slots=True)
class RunFigures:
    seed: int
    reservation: str  # "off" or the ``after`` threshold
    gang_wait: float | None  # seconds from arrival to start; None: not started by the end
    gang_reason: str  # its pending reason at the end ("" once it started)
    gang_lost: int  # times it was up and lost pods below its minimum (evicted) again
    gang_done: float | None  # seconds from arrival to finishing its hour of work; None: not by the end
    utilization: float  # time-averaged over the run
    utilization_after_arrival: float  # time-averaged from the gang's arrival to the end
    small_started: int
    small_wait_p50: float | None
    small_wait_p90: float | None
    small_waiting: int  # small jobs arrived and not started at the end
    evictions: int
    session_p50: float
    session_p99: float
    wall: float

    def row(self) -> list[Any]:
        started = "not started" if self.gang_wait is None else f"{self.gang_wait / 60:.0f} min"
        done = "-" if self.gang_done is None else f"{self.gang_done / 60:.0f} min"
        return [
            self.seed,
            self.reservation,
            started,
            self.gang_lost,
            done,
            f"{self.utilization:.1%}",
            f"{self.utilization_after_arrival:.1%}",
            self.small_started,
            _minutes(self.small_wait_p50),
            _minutes(self.small_wait_p90),
            self.small_waiting,
            self.evictions,
            f"{self.session_p50 * 1000:.0f} / {self.session_p99 * 1000:.0f} ms",
            f"{self.wall:.0f} s",
        ]


HEADERS = [
    "seed",
    "reservation",
    "gang started after",
    "gang lost its run",
    "gang done after",
    "GPU util",
    "util after arrival",
    "small jobs started",
    "wait p50",
    "wait p90",
    "still waiting",
    "evictions",
    "session p50 / p99",
    "wall",
]


def config_for(after: str, gang_pods: int) -> SchedulerConfig:
    if after == "off":
        return SchedulerConfig()
    min_pods = min(MIN_PODS, gang_pods)
    return SchedulerConfig.model_validate({"reservation": {"after": after, "minPods": min_pods}})


def run_one(size: StarvedGang, seed: int, after: str, period: float = scenarios.PERIOD) -> RunFigures:
    scenario = scenarios.starved_gang(seed, size)
    coordinator = InProcess(in_process_coordinator(config_for(after, size.gang_pods), 1))
    settings = SimSettings(period=period, horizon=size.hours * 3600)
    simulation = Simulation(coordinator, scenario.nodes, scenario.workload, settings, on_step=_progress(seed, after))
    started = time.perf_counter()
    metrics = simulation.run()
    wall = time.perf_counter() - started
    name = gang(size).name
    run = simulation.jobs[name]
    others = [r for r in simulation.jobs.values() if r.spec.name != name]
    small = [r.first_start - r.spec.arrival for r in others if r.first_start is not None]
    reason = next((why for job, _, why in metrics.waiting_jobs if job == name), "")
    return RunFigures(
        seed=seed,
        reservation=after,
        gang_wait=None if run.first_start is None else run.first_start - size.gang_arrival,
        gang_reason=reason,
        gang_lost=run.epoch,
        gang_done=None if run.finished_at is None else run.finished_at - size.gang_arrival,
        utilization=metrics.gpu_utilization,
        utilization_after_arrival=_average(metrics.timeline, size.gang_arrival),
        small_started=len(small),
        small_wait_p50=float(np.percentile(small, 50)) if small else None,
        small_wait_p90=float(np.percentile(small, 90)) if small else None,
        small_waiting=len(others) - len(small),
        evictions=sum(metrics.evictions.values()),
        session_p50=metrics.latency(50),
        session_p99=metrics.latency(99),
        wall=wall,
    )


def _progress(seed: int, after: str) -> Callable[[float], None]:
    """Prints every simulated half hour, with the wall time so far (a full run takes a while)."""
    began, shown = time.perf_counter(), [0.0]

    def step(now: float) -> None:
        if now - shown[0] >= 1800:
            shown[0] = now
            wall = time.perf_counter() - began
            print(f"  seed {seed}, {after}: {now / 3600:.1f} simulated h in {wall:.0f} s", file=sys.stderr, flush=True)

    return step


def _average(timeline: Sequence[tuple[float, float]], since: float) -> float:
    """The time-averaged value of a step timeline (each sample holds until the next) from ``since``."""
    total = weight = 0.0
    for (t0, value), (t1, _) in zip(timeline, timeline[1:], strict=False):
        span = max(0.0, t1 - max(t0, since))
        total += value * span
        weight += span
    return total / weight if weight > 0 else 0.0


def _minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 60:.0f} min"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtests.starved_gang", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="80 nodes and a 64-pod gang")
    parser.add_argument("--seeds", type=int, nargs="+", help="workload seeds (default: 1 2 3, or 1 with --quick)")
    parser.add_argument(
        "--after", nargs="+", default=["off", "10m"], help="'off' and reservation thresholds (Go durations)"
    )
    parser.add_argument("--nodes", type=int, help="nodes (default: 1,000, or 80 with --quick)")
    parser.add_argument("--gang-pods", type=int, help="pods of the gang (default: 512, or 64 with --quick)")
    parser.add_argument("--hours", type=float, help="simulated hours (default: the scenario's)")
    parser.add_argument(
        "--non-preemptible-gang",
        action="store_true",
        help="the gang's PodGroup says non-preemptible (within its team's quota, so reclaim cannot take it once up)",
    )
    parser.add_argument("--json", metavar="FILE", help="write every run's figures as JSON")
    args = parser.parse_args(argv)
    size = QUICK if args.quick else FULL
    if args.nodes:
        size = replace(size, nodes=args.nodes)
    if args.gang_pods:
        size = replace(size, gang_pods=args.gang_pods)
    if args.hours:
        size = replace(size, hours=args.hours)
    if args.non_preemptible_gang:
        size = replace(size, gang_preemptible=False)
    seeds = args.seeds or ([1] if args.quick else [1, 2, 3])
    print(
        f"starved-gang: {size.nodes:,} nodes, a {size.gang_pods}-pod one-GPU gang arriving at "
        f"{size.gang_arrival / 3600:g} h ({'preemptible' if size.gang_preemptible else 'non-preemptible'}), "
        f"{size.hours:g} simulated hours, seeds {seeds}",
        flush=True,
    )
    figures = []
    for seed in seeds:
        for after in args.after:
            one = run_one(size, seed, after)
            figures.append(one)
            print(format_table(HEADERS, [one.row()]).splitlines()[-1], flush=True)
            if one.gang_reason:
                print(f"  gang's pending reason at the end: {one.gang_reason}", flush=True)
    print()
    print(format_table(HEADERS, [f.row() for f in figures]))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(f) for f in figures], indent=1) + "\n", encoding="utf-8")
        print(f"\nfigures written to {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
