"""The simulation report as people read it."""

from __future__ import annotations

import textwrap

from kai_ray.app.cli.output import format_table
from kai_ray.app.sim.holding_rules import ACTION_PART
from kai_ray.app.sim.report import SimMetrics
from kai_ray.app.sim.shortfall import LONG_STRETCH, QueueShortfall

SHORT_QUEUES_SHOWN = 10


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 120:
        return f"{value:.0f}s"
    if value < 7200:
        return f"{value / 60:.0f}m"
    return f"{value / 3600:.1f}h"


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_text(m: SimMetrics, nodes: int, shards: int, setup_seconds: float, load: float) -> str:
    report = m.to_json(nodes, shards)
    mode = "in one process" if shards <= 1 else f"coordinator + {shards} shard actors on Ray"
    lines = [
        f"kai-ray simulate: {nodes:,} nodes ({m.gpu_capacity:,.0f} GPUs), {m.jobs:,} jobs / {m.pods_total:,} pods "
        + (
            f"offering {load:.2f}x the GPU-hours the cluster has while they arrive; {mode}"
            if load > 0
            else f"all submitted at the start; {mode}"
        ),
        f"  simulated {m.simulated_seconds / 3600:.1f} h in {m.wall_seconds:.1f} s wall "
        f"(+{setup_seconds:.1f} s setup), {len(m.cycle_walls):,} scheduling cycles",
        "",
        "scheduler",
        f"  decisions          {m.bound:,} pods bound, {m.pods_per_second:,.0f} per second of scheduler time "
        f"({m.scheduler_seconds:.1f} s; arrivals set the pace here, `python -m loadtests` measures the ceiling)",
        f"  session latency    p50 {m.latency(50) * 1000:.1f} ms, p99 {m.latency(99) * 1000:.1f} ms",
        "  evictions          "
        + (", ".join(f"{n} by {a}" for a, n in sorted(m.evictions.items())) or "none")
        + f"; {m.restarts} gang restarts",
        f"  partial gangs      {m.partial_gangs} (must be 0)",
        f"  over-committed     {len(m.overcommits)} node checks failed (must be 0)",
        f"  accounting         {len(m.accounting_errors)} differences between the shards' node usage and a "
        "recount from the pods, checked every cycle (must be 0)",
        f"  memory (RSS)       {m.rss_bytes / 2**20:,.0f} MiB, this process and its children (Ray included)",
        "",
        "cluster",
        f"  GPU utilization    {m.gpu_utilization:.1%} time-averaged "
        f"({m.gpu_seconds_used / 3600:,.0f} of {m.gpu_seconds_capacity / 3600:,.0f} GPU-hours)",
        f"  fair-share error   {m.fair_share_error:.1%} of the cluster's GPUs "
        "(time-averaged sum over leaf queues of |allocated - fair share|)",
        f"  jobs               {m.started_jobs:,} started, {m.completed_jobs:,} completed of {m.jobs:,}",
        "  pods at the end    " + ", ".join(f"{n:,} {s}" for s, n in sorted(report["podsByEndState"].items()) if n),
        *(
            f"  large gang         {name}: "
            + ("never started" if wait is None else f"started {_seconds(wait)} after it arrived")
            for name, wait in report["largeGangWaits"].items()
        ),
        "",
    ]
    rows = []
    for name, wait in report["queueWait"].items():
        rows.append(
            [
                name,
                wait["started"],
                _seconds(wait["p50Seconds"]),
                _seconds(wait["p90Seconds"]),
                _seconds(wait["maxSeconds"]),
                f"{wait['fairShareErrorGpus']:.1f}",
            ]
        )
    lines.append(
        format_table(["queue", "jobs started", "wait p50", "wait p90", "wait max", "|alloc - fair share| (GPUs)"], rows)
    )
    lines += _below_fair_share(m)
    if m.usage is not None:
        lines += ["", "time-based fair share (usage: the queue's GPU-time over the cluster's, over the window)"]
        history = report["queueHistory"]
        usage_rows = []
        for name, entry in history.items():
            samples = entry["allocatedAndFairShare"]
            usage = entry.get("usage") or [[0.0, 0.0]]
            usage_rows.append(
                [
                    name,
                    f"{entry['gpuHours']:,.1f}",
                    f"{entry['shareOfGpuHours']:.1%}",
                    f"{samples[-1][2]:g}" if samples else "-",
                    f"{usage[-1][1]:.3f}",
                ]
            )
        lines.append(
            format_table(["queue", "GPU-hours", "share of GPU-hours", "fair share now", "usage now"], usage_rows)
        )
    if m.waiting_jobs:
        lines += ["", f"why jobs still wait ({len(m.waiting_jobs):,} jobs; the largest first)"]
        lines += [f"  {job} ({n} pods): {_shorten(reason)}" for job, n, reason in m.waiting_jobs[:5]]
    if m.overcommits:
        lines += ["", "over-committed nodes (a scheduler bug):"] + [f"  {o}" for o in m.overcommits[:5]]
    if m.accounting_errors:
        lines += ["", "node usage the scheduler got wrong (a scheduler bug):"]
        lines += [f"  {o}" for o in m.accounting_errors[:5]]
    return "\n".join(lines)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f}h"


def _below_fair_share(m: SimMetrics) -> list[str]:
    """Per queue that was short of its fair share: how long, and the reasons its jobs waited for."""
    short = [(name, q) for name, q in m.shortfall.queues.items() if q.seconds > 0]
    if not short:
        return ["", "below fair share    no queue was short of its fair share by one of its waiting jobs"]
    short.sort(key=lambda item: (-item[1].longest_seconds, item[0]))
    lines = [
        "",
        "below fair share (short by at least the GPUs of its smallest waiting job; time, longest stretch, and the",
        "pending reasons of its waiting jobs meanwhile, with the share of that time each held)",
    ]
    rows = []
    for name, q in short[:SHORT_QUEUES_SHOWN]:
        seconds = q.seconds
        rows.append(
            [
                name,
                _seconds(seconds),
                f"{_seconds(q.longest_seconds)} ({_hours(q.longest[0])}-{_hours(q.longest[1])})",
                f"{q.largest_gap:g}",
                f"{q.paused_seconds / seconds:.0%}",
                f"{q.idle_gpu_seconds / seconds:,.0f} ({q.idle_usable_seconds / seconds:,.0f})",
            ]
        )
    lines.append(
        format_table(
            ["queue", "time short", "longest", "largest gap", "search paused", "idle GPUs (its pods fit)"], rows
        )
    )
    lines += _long_stretch_verdict(short)
    for name, q in short[:SHORT_QUEUES_SHOWN]:
        lines.append(f"  {name}:")
        lines += _reason_lines(q)
        lines += _stretch_lines(q)
    return lines


def _long_stretch_verdict(short: list[tuple[str, QueueShortfall]]) -> list[str]:
    """Whether every stretch over the bound had a rule named for it, all of its time."""
    long = [(name, s) for name, q in short for s in q.long_stretches()]
    bound = _seconds(LONG_STRETCH)
    if not long:
        return [f"  no queue was short for longer than {bound} at a stretch"]
    unnamed = [(name, s) for name, s in long if s.unnamed_seconds > 0]
    head = f"  {len(long)} stretch{'es' if len(long) != 1 else ''} longer than {bound}"
    if not unnamed:
        return [f"{head}: a reclaim rule named for each, all of its time (per queue below)"]
    lines = [f"{head}; for part of these no waiting job's reason named a rule:"]
    lines += [
        f"    {name} {_hours(s.start)}-{_hours(s.end or s.start)}: {s.unnamed_seconds / (s.seconds or 1):.0%} of it"
        for name, s in unnamed
    ]
    return lines


def _stretch_lines(q: QueueShortfall) -> list[str]:
    """Each stretch over the bound: when, how short, what held it, and the rule in figures."""
    lines = []
    for s in q.long_stretches():
        seconds = s.seconds or 1.0
        held = ", ".join(f"{share:.0%} {rule}" for rule, share in s.held_by())
        if s.unnamed_seconds:
            held += f"{', ' if held else ''}{s.unnamed_seconds / seconds:.0%} no rule named"
        lines.append(
            f"    {_hours(s.start)}-{_hours(s.end or s.start)} ({_seconds(s.length)}), short by up to "
            f"{s.largest_gap:g} GPUs, idle GPUs {s.idle_gpu_seconds / seconds:,.0f} "
            f"({s.idle_usable_seconds / seconds:,.0f} where its pods fit), "
            f"search paused {s.paused_seconds / seconds:.0%}:"
        )
        lines += textwrap.wrap(f"held by: {held}", 150, initial_indent=" " * 6, subsequent_indent=" " * 8)
        lines += textwrap.wrap(
            f"at {_hours(s.peak_at)}, {s.largest_gap:g} GPUs short: {s.peak_text()}",
            150,
            initial_indent=" " * 6,
            subsequent_indent=" " * 8,
        )
    return lines


def _reason_lines(q: QueueShortfall) -> list[str]:
    lines = []
    for _, time in q.dominant(2):
        jobs = sorted(time.jobs)
        named = ", ".join(f"{job} ({q.job_shapes.get(job, '?')})" for job in jobs[:2])
        more = f" and {len(jobs) - 2} more" if len(jobs) > 2 else ""
        lines.append(f"    {time.seconds / q.seconds:4.0%} {named}{more}")
        allocate, *actions = ACTION_PART.split(time.example)
        lines.append(f"         {_shorten(allocate, 160)}")
        for part in actions:  # what an action says names the rule that holds the job: all of it
            lines += textwrap.wrap(part, 150, initial_indent=" " * 9, subsequent_indent=" " * 11)
    return lines
