"""The registry a scheduler serves, and KAI's counters whose names carry no ``_total``.

A registry is made per scheduler and passed in (never registered at import): tests and
several schedulers in one process do not share state. It holds the process, platform and
Python GC collectors every Prometheus client serves. ``_created`` series are off: they are an
OpenMetrics addition neither kube-scheduler nor KAI serves, and they would double the series.

KAI's Go counters are named without ``_total`` (``kai_total_preemption_attempts``,
``kai_podgroups_scheduled_by_action``); prometheus_client appends ``_total`` to every counter
it exposes, so ``ExactCounter`` keeps the name and ``exposition`` writes its TYPE as counter,
exactly as KAI's /metrics shows it.
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from collections.abc import Iterator, Sequence

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.metrics_core import Metric

# Names of the ExactCounters registered in each registry, for exposition() (held weakly: a
# registry that is dropped takes its entry with it).
_EXACT_NAMES: weakref.WeakKeyDictionary[CollectorRegistry, set[str]] = weakref.WeakKeyDictionary()


def new_registry() -> CollectorRegistry:
    """A registry with the process, platform and GC collectors; ``_created`` series off."""
    # A process-wide switch of prometheus_client: every registry kai-ray serves wants it off.
    disable_created_metrics()  # type: ignore[no-untyped-call]
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


class ExactCounter:
    """A monotonically increasing count exposed under exactly ``name`` (no ``_total`` suffix)."""

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str] = (), *, registry: CollectorRegistry
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._values: dict[tuple[str, ...], float] = defaultdict(float)
        if not self.labelnames:
            self._values[()] = 0.0  # served from the start, as a Go counter without labels is
        registry.register(self)  # a collector by protocol: collect() and describe()
        _EXACT_NAMES.setdefault(registry, set()).add(name)

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("a counter only goes up")
        if len(labels) != len(self.labelnames):
            raise ValueError(f"{self.name} takes labels {self.labelnames}")
        self._values[labels] += amount

    def value(self, *labels: str) -> float:
        return self._values.get(labels, 0.0)

    def describe(self) -> list[Metric]:
        return [Metric(self.name, self.documentation, "unknown")]

    def collect(self) -> Iterator[Metric]:
        # "unknown" keeps prometheus_client from renaming it; exposition() restores the type.
        family = Metric(self.name, self.documentation, "unknown")
        for labels, value in sorted(self._values.items()):
            family.add_sample(self.name, dict(zip(self.labelnames, labels, strict=True)), value)
        yield family


def exposition(registry: CollectorRegistry) -> bytes:
    """The text format of ``registry``, with ExactCounters typed as counters as KAI's Go client types them."""
    text = generate_latest(registry)
    for name in sorted(_EXACT_NAMES.get(registry, ())):
        text = text.replace(f"# TYPE {name} untyped\n".encode(), f"# TYPE {name} counter\n".encode())
    return text
