"""KAI Scheduler's published scale scenarios, run for KAI itself, for kai-ray and (where the
scenario is plain pods) for kube-scheduler, each on a fresh real cluster of kwok nodes.

    python -m loadtests.kai_scale                         # every scenario, 500 nodes of 8 GPUs
    python -m loadtests.kai_scale --quick                 # CI's size: 20 nodes, 3 samples
    python -m loadtests.kai_scale --nodes 500 --scenarios fill,reclaim-one --out kai-scale-500
    python -m loadtests.kai_scale --nodes 500 --scenarios reclaim-large --systems kai-ray

Scenarios (``kai_scale_scenarios.py`` says where they come from and what differs):
fill, topology, infeasible, reclaim-one, reclaim-large, reclaim-many. Each row: the scenario's
figure in seconds (an average for infeasible and reclaim-one, as KAI reports them), pods (or
samples) done per second of the measured window, the apiserver's requests per pod, and each
process's CPU seconds in the window. A scenario that does not finish in its timeout is reported
"timed out" with what was done, and the run goes on.

Written to --out (default ``kai-scale-out``): ``results.json`` (the rows), ``state.json`` (per
scenario and system, the cluster at the end: each pod's queue, node and phase, the pods
evicted, pods and GPUs per node, each queue's GPUs) and ``seconds.png`` (the figures, log scale).
After the rows, KAI's and kai-ray's final states are compared scenario by scenario
(``kai_scale_compare``: per queue bound, pending, evicted and GPUs; how the GPUs lie on the
nodes), each difference classified. Exit code 1 when a row did not end ok or a difference is not
classified.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from kai_ray.app.cli.output import format_table
from loadtests.kai_scale_compare import differences, summary
from loadtests.kai_scale_run import Outcome, run_scenario
from loadtests.kai_scale_scenarios import (
    BY_KEY,
    DISTRIBUTED_PODS,
    FULL,
    KAI_SCALE_ARGS,
    QUICK,
    SCENARIOS,
    Scenario,
    Size,
)
from loadtests.kai_scale_steps import STEPS
from loadtests.kwok_phase import KAI, KUBE
from loadtests.systems import ClusterScheduler, KaiScheduler, ProcessScheduler
from realcluster.build import KAI as KAI_BINARIES
from realcluster.build import BuildFailed, GoMissing, ensure_built
from realcluster.kai import KaiOptions

SHORT = {"kube-apiserver": "apiserver", "podgroupcontroller": "pgctl", "queuecontroller": "qctl"}


SYSTEMS = ("KAI", "kai-ray", "kube-scheduler")


def systems(scenario: Scenario, shards: int | None, names: Sequence[str] = SYSTEMS) -> list[ClusterScheduler]:
    """KAI, kai-ray, and kube-scheduler where the scenario is plain pods (those of ``names``);
    fresh for each run."""
    found: list[ClusterScheduler] = []
    if "KAI" in names:
        found.append(KaiScheduler(KaiOptions(extra_args=dict(KAI_SCALE_ARGS))))
    if "kai-ray" in names:
        found.append(ProcessScheduler(KAI, shards))
    if scenario.plain_pods and "kube-scheduler" in names:
        found.append(ProcessScheduler(KUBE))
    return found


def chosen_systems(names: str | None) -> tuple[str, ...]:
    if not names:
        return SYSTEMS
    by_lower = {name.lower(): name for name in SYSTEMS}
    keys = [n.strip().lower() for n in names.split(",") if n.strip()]
    unknown = [k for k in keys if k not in by_lower]
    if unknown:
        raise ValueError(f"no system {', '.join(unknown)}; there are {', '.join(SYSTEMS)}")
    return tuple(by_lower[k] for k in keys)


def chosen(names: str | None) -> list[Scenario]:
    if not names:
        return list(SCENARIOS)
    keys = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [k for k in keys if k not in BY_KEY]
    if unknown:
        raise ValueError(f"no scenario {', '.join(unknown)}; there are {', '.join(BY_KEY)}")
    return [BY_KEY[k] for k in keys]


def _figure(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def report(outcomes: Sequence[Outcome], size: Size) -> str:
    rows = []
    for o in outcomes:
        scenario = BY_KEY[o.scenario]
        cpu = " ".join(f"{SHORT.get(k, k)} {v:.1f}" for k, v in sorted(o.cpu.items()) if v >= 0.05)
        rows.append(
            [
                o.scenario,
                o.system,
                o.status,
                _figure(o.seconds),
                f"{o.done}/{o.pods}",
                _figure(o.pods_per_second),
                _figure(o.requests_per_pod, 2),
                cpu or "-",
                _figure(scenario.published) if size.nodes == FULL.nodes else "-",
            ]
        )
    headers = ["scenario", "system", "status", "seconds", "done", "pods/s", "apiserver req/pod", "CPU s"]
    text = format_table([*headers, "KAI published s (500 nodes)"], rows)
    text += "\n" + "\n".join(f"{s.key}: {s.measures}" for s in SCENARIOS if s.key in {o.scenario for o in outcomes})
    return text


def plot(outcomes: Sequence[Outcome], path: Path) -> None:
    """Seconds per scenario, a bar per system (log scale: the scenarios differ by orders of magnitude)."""
    import matplotlib

    matplotlib.use("Agg")  # files only; never a window
    import matplotlib.pyplot as plt

    scenarios = list(dict.fromkeys(o.scenario for o in outcomes))
    names = list(dict.fromkeys(o.system for o in outcomes))
    figure, axes = plt.subplots(figsize=(max(6.0, 1.6 * len(scenarios)), 4.0))
    width = 0.8 / max(len(names), 1)
    for i, name in enumerate(names):
        heights = [
            next((o.seconds or 0.0 for o in outcomes if o.scenario == s and o.system == name), 0.0) for s in scenarios
        ]
        positions = [j + (i - (len(names) - 1) / 2) * width for j in range(len(scenarios))]
        axes.bar(positions, heights, width, label=name)
    axes.set_xticks(range(len(scenarios)), scenarios)
    axes.set_yscale("log")
    axes.set_ylabel("seconds, log scale (no bar: not done)")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def write(out: Path, size: Size, outcomes: Sequence[Outcome], states: Any) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(
        json.dumps({"size": asdict(size), "results": [o.to_json() for o in outcomes]}, indent=1)
    )
    (out / "state.json").write_text(json.dumps({"size": asdict(size), "state": states}, indent=1))


async def run_all(
    scenarios: Sequence[Scenario], size: Size, shards: int | None, out: Path, names: Sequence[str] = SYSTEMS
) -> tuple[list[Outcome], Any]:
    """Every scenario for every system; the files are written after each row, so a long run
    stopped part-way still leaves what it measured."""
    outcomes: list[Outcome] = []
    states: dict[str, dict[str, Any]] = {}
    for scenario in scenarios:
        for system in systems(scenario, shards, names):
            outcome, state = await run_scenario(scenario, system, size, STEPS[scenario.key])
            outcomes.append(outcome)
            states.setdefault(scenario.key, {})[system.name] = state
            write(out, size, outcomes, states)
            print(report([outcome], size).splitlines()[2], file=sys.stderr)
    return outcomes, states


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"CI's size: {QUICK.nodes} nodes, scaled-down scenarios")
    parser.add_argument("--nodes", type=int, help=f"kwok nodes of 8 GPUs (default {FULL.nodes}; --quick {QUICK.nodes})")
    parser.add_argument("--samples", type=int, help="samples of the averaged scenarios (KAI's: 10)")
    parser.add_argument("--scenarios", help=f"comma-separated, of: {', '.join(BY_KEY)} (default: all)")
    parser.add_argument("--shards", type=int, help="kai-ray's shard actors (default: its config)")
    parser.add_argument(
        "--systems", help=f"comma-separated, of: {', '.join(SYSTEMS)} (default: all; states compare KAI with kai-ray)"
    )
    parser.add_argument("--out", default="kai-scale-out", help="directory for results.json, state.json, seconds.png")
    args = parser.parse_args(argv)
    try:
        scenarios = chosen(args.scenarios)
        names = chosen_systems(args.systems)
    except ValueError as error:
        parser.error(str(error))
    size = QUICK if args.quick else FULL
    if args.nodes:
        size = replace(size, nodes=args.nodes)
    if args.samples:
        size = replace(size, samples=args.samples)
    if size.nodes < DISTRIBUTED_PODS:
        parser.error(
            f"--nodes must be at least {DISTRIBUTED_PODS} (the infeasible scenario's job is as many full nodes)"
        )
    try:
        ensure_built()
        ensure_built(binaries=KAI_BINARIES)
    except (GoMissing, BuildFailed) as error:
        print(f"kai_scale: {error}", file=sys.stderr)
        return 2
    out = Path(args.out)
    outcomes, states = asyncio.run(run_all(scenarios, size, args.shards, out, names))
    plot(outcomes, out / "seconds.png")
    print(report(outcomes, size))
    print(summary(states))
    print(f"written: {out / 'results.json'}, {out / 'state.json'}, {out / 'seconds.png'}")
    unexplained = [d for d in differences(states) if d.classified[0] == "unclassified"]
    return 0 if all(o.status == "ok" for o in outcomes) and not unexplained else 1


if __name__ == "__main__":
    raise SystemExit(main())
