"""Prometheus metrics of a scheduler; ``docs/metrics.md`` lists every series.

Three families: kube-scheduler's names only where kube-scheduler's meaning and labels hold
(``kube_scheduler``), KAI's names with KAI's meaning, units and labels (``kai``), and kai-ray's
own under ``kai_ray_`` (``own``). ``new_registry`` adds the process and GC collectors; registries
are always passed in, nothing registers at import.
"""

from k8s_adapter.metrics.own import SECONDS_BUCKETS
from k8s_adapter.metrics.registry import ExactCounter, exposition, new_registry
from k8s_adapter.metrics.scheduler import SchedulerMetrics

__all__ = ["SECONDS_BUCKETS", "ExactCounter", "SchedulerMetrics", "exposition", "new_registry"]
