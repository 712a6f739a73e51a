"""The job-order plugins (KAI's ``priority`` and ``elastic``) as parts of one sort key.

KAI asks its job-order functions in plugin order and the first with an opinion decides; when
none has one, the older job goes first, then the smaller UID. As a key that is a tuple: one
component per enabled plugin in its configured order, then creation time and UID. Before them
all stands kai-ray's own ``overrun`` flag (jobs past their expected runtime go last; off by
default). The victim order is the same key reversed component by component, in values that
compare natively (victim searches sort thousands of jobs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from coordinator.jobs import Job, descending
from coordinator.plugins.hooks import KAI_KEYS, JobKeys

Part = Callable[[Job], object]

# plugin -> (its component of the job order, the same component for the victim order)
PARTS: dict[str, tuple[Part, Part]] = {
    "priority": (lambda job: -(job.priority + job.boost), lambda job: job.priority + job.boost),
    "elastic": (lambda job: job.elastic_state(), lambda job: -job.elastic_state()),
}
KAI_DEFAULT = ("priority", "elastic")


def job_keys(plugins: Sequence[str]) -> JobKeys:
    """The keys for these job-order plugins, in this order."""
    if tuple(plugins) == KAI_DEFAULT:
        return KAI_KEYS  # the same key, written out for speed
    return composed(plugins)


def composed(plugins: Sequence[str]) -> JobKeys:
    order_parts = tuple(PARTS[name][0] for name in plugins)
    victim_parts = tuple(PARTS[name][1] for name in plugins)

    def order(job: Job) -> tuple[object, ...]:
        group = job.group
        return (job.overrun, *(part(job) for part in order_parts), group.created, group.uid or job.key)

    def victim(job: Job) -> tuple[object, ...]:
        group = job.group
        return (
            not job.overrun,
            *(part(job) for part in victim_parts),
            -group.created,
            descending(group.uid or job.key),
        )

    return JobKeys(order, victim)
