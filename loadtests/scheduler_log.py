"""What kai-ray says about a window of its run: the lines its log writes there (long loop
iterations, each busy cycle's summary, pods the grouper could not group yet) and its loop-step
histograms read at both ends."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# What kai-ray logs (k8s_adapter/runner.py, k8s_adapter/decision_log.py): the loop warns of an
# iteration only when it took more than ten periods, and each busy cycle has a summary line.
LONG_ITERATION = re.compile(r"a scheduler iteration took (\d+(?:\.\d+)?)s")
CYCLE_SUMMARY = re.compile(
    r"cycle (\d+): (\d+) bound, (\d+) pipelined, (\d+) evicted, (\d+) pending \(\d+ with a new reason\)"
    r" in (\d+(?:\.\d+)?) ms"
)
GROUPING_RETRY = "could not group"
# k8s_adapter/startup.py: one line once the first bind is answered, the steps up to it.
STARTUP = re.compile(r"first bind (\d+(?:\.\d+)?)s after the process started: (.*?)(?= \w+_at=|$)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class LogFacts:
    """What kai-ray's log says about a window of its run."""

    long_iterations: tuple[float, ...] = ()  # seconds of each iteration the loop warned about
    cycles: int = 0  # busy cycles (those with a summary line at info)
    cycle_seconds: float = 0.0  # their time together
    longest_cycle: float = 0.0
    cycle_binds: int = 0  # pods the cycles chose nodes for
    grouping_retries: int = 0  # pods the pod grouper could not group yet

    @property
    def longest_iteration(self) -> float | None:
        return max(self.long_iterations) if self.long_iterations else None


def parse_scheduler_log(text: str) -> LogFacts:
    iterations = tuple(float(m.group(1)) for m in LONG_ITERATION.finditer(text))
    cycles = [(int(m.group(2)), float(m.group(6)) / 1000) for m in CYCLE_SUMMARY.finditer(text)]
    return LogFacts(
        long_iterations=iterations,
        cycles=len(cycles),
        cycle_seconds=sum(seconds for _, seconds in cycles),
        longest_cycle=max((seconds for _, seconds in cycles), default=0.0),
        cycle_binds=sum(bound for bound, _ in cycles),
        grouping_retries=text.count(GROUPING_RETRY),
    )


def startup_breakdown(text: str) -> tuple[float, str] | None:
    """kai-ray's own account of its start: seconds to its first bind answered, and the steps."""
    found = STARTUP.search(text)
    return (float(found.group(1)), found.group(2)) if found else None


def step_delta(
    before: dict[str, tuple[int, float]], after: dict[str, tuple[int, float]]
) -> dict[str, tuple[int, float]]:
    """kai-ray's loop steps run between two readings of its histograms (steps that did not run left out)."""
    out: dict[str, tuple[int, float]] = {}
    for step, (count, seconds) in after.items():
        was_count, was_seconds = before.get(step, (0, 0.0))
        if count > was_count:
            out[step] = (count - was_count, round(seconds - was_seconds, 2))
    return out


Iterations = tuple[float, dict[float, int]]  # the longest since the start, cumulative bucket counts


def longest_in_window(before: Iterations, after: Iterations) -> tuple[float, bool] | None:
    """The longest loop iteration between two readings of kai-ray's metrics: exact (True) when the
    longest since the start grew meanwhile, else the histogram's bound on it (False); None when
    no iteration ended in between."""
    (was, counts_before), (now, counts_after) = before, after
    if not counts_after:
        return None
    new = {le: count - counts_before.get(le, 0) for le, count in counts_after.items()}
    total = new.get(float("inf"), 0)
    if total <= 0:
        return None
    if now > was:
        return now, True
    return min(le for le, count in new.items() if count == total), False


def iteration_text(longest: tuple[float, bool] | None, facts: LogFacts | None) -> str:
    if longest is not None:
        value, exact = longest
        return f"{value:.2f}" if exact else f"<= {value:g}"
    return longest_iteration_text(facts)


def log_json(facts: LogFacts) -> dict[str, Any]:
    return {name: getattr(facts, name) for name in LogFacts.__slots__}


def longest_iteration_text(facts: LogFacts | None) -> str:
    if facts is None:
        return "-"
    longest = facts.longest_iteration
    # The loop names an iteration only past ten periods (10 s at its default period): below that
    # its log says nothing about iteration times, and the table says so rather than guess.
    return f"{longest:.1f}" if longest is not None else "none logged (<10)"
