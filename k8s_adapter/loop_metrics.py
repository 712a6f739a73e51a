"""The scheduler loop's own metrics: failed steps, time per step, time per iteration and the
longest iteration since the start (docs/metrics.md)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from k8s_adapter.metrics import SECONDS_BUCKETS


class LoopMetrics:
    def __init__(self, registry: CollectorRegistry, steps: tuple[str, ...]) -> None:
        self.errors = Counter(
            "kai_ray_loop_errors", "Scheduler loop steps that failed, by step.", ["step"], registry=registry
        )
        self.coordinator_losses = Counter(
            "kai_ray_coordinator_losses",
            "Coordinators lost with a call (their actor died), by whether a new one was started.",
            ["replaced"],
            registry=registry,
        )
        self.step_seconds = Histogram(
            "kai_ray_loop_step_duration_seconds",
            "Time per scheduler loop step.",
            ["step"],
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        # Every iteration's time, not only those the loop warns of (over ten periods): a histogram
        # for how they spread, and the longest since the start for what a window's histogram
        # can only bound.
        self.iteration_seconds = Histogram(
            "kai_ray_loop_iteration_duration_seconds",
            "Time per scheduler loop iteration (feed, group, cycle and the steps it waits for).",
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        self.longest_iteration = Gauge(
            "kai_ray_loop_iteration_longest_seconds",
            "The longest scheduler loop iteration since the process started.",
            registry=registry,
        )
        self.longest = 0.0  # seconds
        for replaced in ("true", "false"):
            self.coordinator_losses.labels(replaced)
        for step in steps:  # every step's series exists from the start, at zero
            self.errors.labels(step)
            self.step_seconds.labels(step)

    def iteration(self, seconds: float) -> None:
        self.iteration_seconds.observe(seconds)
        if seconds > self.longest:
            self.longest = seconds
            self.longest_iteration.set(seconds)

    def failed(self, step: str) -> None:
        self.errors.labels(step).inc()

    def step(self, step: str, seconds: float) -> None:
        self.step_seconds.labels(step).observe(seconds)
