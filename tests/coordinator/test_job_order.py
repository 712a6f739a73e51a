"""The job order's walk of the queue tree, as allocation moves between its pops."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np

from coordinator.fairshare import QueueSpec, QueueTree
from coordinator.job_order import JobOrder
from coordinator.jobs import Job
from coordinator.plugins.hooks import JobKeys
from coordinator.queue_state import QueueState

ONE_GPU = (1.0, 0.0, 0.0)


@dataclass(frozen=True)
class _Job:
    """What the order reads of a job: its queue, and a name for its key."""

    queue: str
    name: str


def _three_sibling_queues() -> QueueState:
    """``a``, ``b`` and ``c``, each with a quota of 3 GPUs, created in that order (so equal
    queues go a, b, c)."""
    specs = [
        QueueSpec(name, None, 100, created, (3, -1, -1), (1, 1, 1), (-1, -1, -1)) for created, name in enumerate("abc")
    ]
    tree = QueueTree.build(specs)
    zeros = np.zeros((len(tree), 3))
    return QueueState(tree, zeros.copy(), zeros.copy(), zeros.copy(), zeros.copy(), np.array([16.0, 64e3, 512e9]))


def test_a_queue_whose_allocation_changed_between_pops_is_judged_as_it_now_stands() -> None:
    # Another action's eviction may give a queue more than the job order took from it (here c,
    # never popped yet, gets 5 GPUs: over its quota of 3 with any job more). The order must go
    # by that from the next pop on, like a queue it popped from, not by what it knew of c.
    queues = _three_sibling_queues()
    keys = JobKeys(order=lambda job: (cast(_Job, job).name,), victim=lambda job: (cast(_Job, job).name,))
    order = JobOrder(queues, request_of=lambda _: np.array(ONE_GPU), keys=keys)
    order.push_all(cast(Job, _Job(queue, f"{queue}{i}")) for queue in "abc" for i in range(3))

    popped = []
    while (job := order.pop()) is not None:
        queue = cast(_Job, job).queue
        popped.append(cast(_Job, job).name)
        queues.add_allocation(queue, ONE_GPU, preemptible=True)  # the job is placed in its queue
        if len(popped) == 1:
            queues.add_allocation("c", (5.0, 0.0, 0.0), preemptible=True)

    # a and b share what is left of their quota turn by turn (the older first on a tie); c goes
    # last, since it is over its quota.
    assert popped == ["a0", "b0", "a1", "b1", "a2", "b2", "c0", "c1", "c2"]
