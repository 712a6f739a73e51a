"""``kai-ray simulate``: the real scheduler on a synthetic cluster and workload, in simulated time."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kai_ray.errors import InputError


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "simulate", help="run the scheduler (coordinator + shard actors) on a synthetic cluster in simulated time"
    )
    parser.add_argument("--nodes", type=int, default=500, help="synthetic nodes (8-GPU, 4-GPU and CPU pools)")
    parser.add_argument(
        "--jobs",
        type=int,
        help="jobs in the workload (default: as many as --load asks for over the first two thirds of --hours)",
    )
    parser.add_argument(
        "--shards",
        type=int,
        help="node shards; 2 or more run as Ray actors (default: 2, and one more per 5,000 nodes above 10,000)",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the cluster and the workload")
    parser.add_argument(
        "--scenario",
        choices=sorted(SCENARIO_NAMES),
        help="a fixed cluster and workload instead of the synthetic ones: kai-time-based-fairshare is KAI's "
        "time-based fair-share example (two queues, one 16-GPU node, 16-GPU jobs; its own config, hours "
        "and period unless given); big-gang and starved-gang put a 512-pod gang in a busy 1,000-node "
        "cluster, starved-gang one kept full by small jobs (run them with and without reservation)",
    )
    parser.add_argument("--hours", type=float, help="simulated hours to run (default: 4, or the scenario's)")
    parser.add_argument(
        "--load",
        type=float,
        default=1.2,
        help="offered load: the jobs' GPU-hours over what the GPUs can run while they arrive "
        "(1.0 keeps the cluster just busy; more builds queues, so reclaim has work)",
    )
    parser.add_argument(
        "--period", type=float, help="simulated seconds between scheduling cycles (default: 10, or the scenario's)"
    )
    parser.add_argument("--config", help="scheduler config YAML (schema: docs/architecture.md#scheduler-config)")
    parser.add_argument("--json", metavar="FILE", help="write the report as JSON (with the Prometheus metrics)")
    parser.add_argument("--plot", metavar="DIR", help="write utilization and queue-share PNGs into DIR")
    parser.add_argument(
        "--dra-share",
        type=float,
        default=0.0,
        help="share (0-1) of GPU nodes whose GPUs a DRA driver publishes, and of whole-GPU jobs that ask "
        "for theirs through ResourceClaims",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(handler=run)


# kai_ray.app.sim.scenarios.SCENARIOS, without importing the simulator
SCENARIO_NAMES = ("kai-time-based-fairshare", "big-gang", "starved-gang")


def default_shards(nodes: int) -> int:
    """Two shard actors show the distributed path on any cluster; big clusters get more."""
    return max(2, -(-nodes // 5000))


def run(args: argparse.Namespace) -> int:
    for flag in ("nodes", "jobs", "hours", "period", "load"):
        if getattr(args, flag) is not None and getattr(args, flag) <= 0:
            raise InputError(f"--{flag}: must be positive")
    if not 0 <= args.dra_share <= 1:
        raise InputError("--dra-share: must be between 0 and 1")
    if args.shards is not None and args.shards < 1:
        raise InputError("--shards: must be at least 1")
    from kai_ray.app.cli.output import warn_about
    from kai_ray.io.config import load_config

    config = load_config(args.config)
    warn_about(config)
    from kai_ray.app.sim.run import SimulationRun
    from kai_ray.app.sim.scenarios import SCENARIOS

    scenario = SCENARIOS[args.scenario](args.seed) if args.scenario else None
    shards = args.shards if args.shards is not None else (1 if scenario else default_shards(args.nodes))
    outcome = SimulationRun(
        config,
        nodes=args.nodes,
        jobs=args.jobs,
        shards=shards,
        seed=args.seed,
        hours=args.hours or (scenario.hours if scenario else 4.0),
        load=args.load,
        period=args.period or (scenario.period if scenario else 10.0),
        progress=not args.no_progress,
        dra_share=args.dra_share,
        scenario=args.scenario,
        config_given=args.config is not None,
    ).execute()
    print(outcome.text())
    if args.json:
        Path(args.json).write_text(json.dumps(outcome.to_json(), indent=1) + "\n", encoding="utf-8")
        print(f"\nreport written to {args.json}", file=sys.stderr)
    if args.plot:
        from kai_ray.app.sim.plots import write_plots

        for path in write_plots(outcome.metrics, Path(args.plot)):
            print(f"plot written to {path}", file=sys.stderr)
    metrics = outcome.metrics
    broken = metrics.partial_gangs or metrics.overcommits or metrics.accounting_errors or outcome.device_conflicts
    return 1 if broken else 0
