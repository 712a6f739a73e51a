"""``kai-ray schedule``: one scheduling session on a snapshot; prints decisions, changes nothing."""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kai_ray.errors import InputError

# The readers, the model and the coordinator are imported when the command runs, not to parse a
# command line: every other command (``run`` above all, whose start is timed) would pay for them.
if TYPE_CHECKING:
    from coordinator.decisions import Decisions
    from kai_ray.config import SchedulerConfig
    from kai_ray.model import ClusterSnapshot


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("schedule", help="run one scheduling session on a cluster snapshot")
    parser.add_argument(
        "--snapshot",
        required=True,
        help="Kubernetes List or multi-document YAML/JSON, or the ZIP of KAI's /get-snapshot (its config applies)",
    )
    parser.add_argument("--config", help="scheduler config YAML (schema: docs/architecture.md#scheduler-config)")
    parser.add_argument("--actions", help="comma-separated actions to run instead of the config's, or 'none'")
    parser.add_argument("--now", help="the session's clock, RFC 3339 (default: the current time)")
    parser.add_argument("--shards", type=int, help="node shards to split the cluster into (default: config)")
    parser.add_argument(
        "--ray-shards", type=int, metavar="N", help="run the session on N shard actors on Ray instead (same decisions)"
    )
    parser.add_argument("-o", "--output", choices=("json", "text"), default="json")
    parser.set_defaults(handler=run, one_shot=True)


def _actions(text: str | None) -> tuple[str, ...] | None:
    from kai_ray.config import DEFAULT_ACTIONS

    if text is None:
        return None
    if text.strip() == "none":
        return ()
    names = tuple(a.strip() for a in text.split(",") if a.strip())
    unknown = [a for a in names if a not in DEFAULT_ACTIONS]
    if unknown:
        raise InputError(f"--actions: unknown action {unknown[0]!r} (known: {', '.join(DEFAULT_ACTIONS)}, none)")
    return names


def decide(
    snapshot: ClusterSnapshot,
    config: SchedulerConfig,
    now: float,
    actions: Sequence[str] | None = None,
    shards: int | None = None,
    ray_shards: int | None = None,
) -> Decisions:
    """The session ``schedule`` runs: the live coordinator's cycle on in-process shards (or on
    ``ray_shards`` shard actors), fed the snapshot as its first deltas. ``actions`` replaces the
    config's list (None keeps it)."""
    from kai_ray.app.runtime import in_process_coordinator, shard_count
    from kai_ray.deltas import ClusterDeltas

    if actions is not None:
        # As for the config's own list: KAI turns consolidation off under a spread strategy.
        spread = "spread" in (config.placementStrategy.gpu, config.placementStrategy.cpu)
        actions = tuple(a for a in actions if not (spread and a == "consolidation"))
    if ray_shards:
        from kai_ray.app.actors import on_ray_actors

        with on_ray_actors(config, ray_shards) as on_actors:
            on_actors.apply(ClusterDeltas.of_snapshot(snapshot))
            return on_actors.cycle(now, actions).decisions
    coordinator = in_process_coordinator(config, shard_count(config, len(snapshot.nodes), shards))
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    return coordinator.cycle(now, actions).decisions


def workload_gang_rows(snapshot: ClusterSnapshot, decisions: Decisions) -> list[list[object]]:
    """One row per gang of the Kubernetes Workload API: the gang in words, the queue it runs in,
    its minimum, its pods and the session's decision for it."""
    members = Counter(f"{p.namespace}/{p.pod_group}" for p in snapshot.pods if p.pod_group)
    rows: list[list[object]] = []
    for group in sorted(snapshot.pod_groups, key=lambda g: g.key):
        if group.workload_api:
            decided = decisions.pod_groups.get(group.key)
            status = decided.status if decided is not None else None
            rows.append([group.workload_api, group.queue, group.min_member, members[group.key], status])
    return rows


def run(args: argparse.Namespace) -> int:
    from kai_ray.app.cli.output import format_table, print_json, warn_about, warn_each
    from kai_ray.app.runtime import tune_gc_for_large_models
    from kai_ray.io.config import config_from_mapping, load_config
    from kai_ray.io.fields import parse_time
    from kai_ray.io.kai_snapshot import is_kai_snapshot, read_kai_snapshot
    from kai_ray.io.snapshot_loader import load_snapshot

    config = load_config(args.config)
    if args.config is None and is_kai_snapshot(args.snapshot):  # KAI's ZIP carries its own configuration
        config = config_from_mapping(read_kai_snapshot(args.snapshot).config, f"{args.snapshot}: config")
    actions = _actions(args.actions)
    try:
        now = parse_time(args.now) if args.now else time.time()
    except ValueError:
        raise InputError(f"--now: bad timestamp {args.now!r}") from None
    snapshot = load_snapshot(args.snapshot, config.schedulerName, config.migWorkerNodeLabelKey)
    tune_gc_for_large_models()  # the process ends after this one session: its model is all it keeps
    warn_about(config)
    warn_each(snapshot.report.warnings)
    if args.ray_shards is not None and args.ray_shards < 1:
        raise InputError(f"--ray-shards: needs at least one shard actor, got {args.ray_shards}")
    decisions = decide(snapshot, config, now, actions, args.shards, args.ray_shards)
    if args.output == "json":
        print_json(decisions.to_json())
        return 0
    headers = ["pod", "status", "node", "gpu groups", "reason"]
    rows: list[list[object]] = [
        [key, d.status, d.node, ",".join(d.gpu_groups) or None, d.reason or None]
        for key, d in sorted(decisions.pods.items())
    ]
    if any(d.gates for d in decisions.pods.values()):  # the column only where some pod is gated
        headers.insert(2, "gate")
        for row, (_, d) in zip(rows, sorted(decisions.pods.items()), strict=True):
            row.insert(2, f"{d.gate}: {','.join(d.gates)}" if d.gates else None)
    print(format_table(headers, rows))
    counts = Counter(d.status for d in decisions.pods.values())
    print("\n" + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    gang_rows = workload_gang_rows(snapshot, decisions)
    if gang_rows:
        print()
        print(format_table(["workload api gang", "queue", "min pods", "pods", "status"], gang_rows))
    queue_rows = [
        [name, q["fairShare"]["gpu"], q["allocated"]["gpu"], q["fairShare"]["cpu"], q["allocated"]["cpu"]]
        for name, q in decisions.queues.items()
    ]
    if queue_rows:
        print()
        print(
            format_table(
                ["queue", "gpu fair share", "gpu allocated", "cpu fair share (m)", "cpu allocated (m)"], queue_rows
            )
        )
    if snapshot.report.skipped_kinds:
        skipped = ", ".join(f"{n} {k}" for k, n in snapshot.report.skipped_kinds.items())
        print(f"\nskipped kinds kai-ray does not use: {skipped}")
    return 0
