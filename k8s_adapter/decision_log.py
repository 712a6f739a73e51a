"""The scheduler's decisions in the log: one line per decision at debug (``-v``), a summary per cycle.

Each line carries structured fields (``cycle``, ``action``, ``pod``, ``node`` or ``reason``) so a
log pipeline can follow one pod. A pending pod is logged when its reason first appears or
changes, not every cycle it keeps waiting. The cycle summary is an info line when the cycle did
something (bound, pipelined, evicted, or a pod found a new reason to wait), a debug line otherwise.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kai_ray.logs import fields

if TYPE_CHECKING:
    from coordinator.coordinator import CycleResult

log = logging.getLogger("kai_ray.decisions")


class DecisionLog:
    def __init__(self) -> None:
        self._pending: dict[str, str] = {}  # pod -> the reason last logged
        self._pipelined: dict[str, str] = {}  # pod -> the node it was last logged pipelined to

    @property
    def waiting(self) -> bool:
        """Whether the last cycle left pods pending or pipelined."""
        return bool(self._pending or self._pipelined)

    def cycle(self, number: int, result: CycleResult) -> None:
        chosen_by = {e.preemptor: e.action for e in result.evictions if e.preemptor}
        debug = log.isEnabledFor(logging.DEBUG)
        for bind in result.binds:
            if debug:
                action = chosen_by.get(result.pod_jobs.get(bind.pod, ""), "allocate")
                log.debug("bind", extra=fields(cycle=number, action=action, pod=bind.pod, node=bind.node))
        for eviction in result.evictions:
            if debug:
                extra = fields(cycle=number, action=eviction.action, pod=eviction.pod, preemptor=eviction.preemptor)
                log.debug("evict", extra=extra)
        pending: dict[str, str] = {}
        pipelined: dict[str, str] = {}
        new_pipelined = changed = 0
        for pod in result.pod_jobs:
            decision = result.decisions.pods.get(pod)
            if decision is None:
                continue
            if decision.status == "Pipelined" and decision.node:
                pipelined[pod] = decision.node
                if self._pipelined.get(pod) != decision.node:
                    new_pipelined += 1
                    if debug:
                        action = chosen_by.get(result.pod_jobs[pod], "allocate")
                        log.debug("pipeline", extra=fields(cycle=number, action=action, pod=pod, node=decision.node))
            elif decision.status == "Pending":
                pending[pod] = decision.reason
                if self._pending.get(pod) != decision.reason:
                    changed += 1
                    if debug:
                        log.debug("pending", extra=fields(cycle=number, pod=pod, reason=decision.reason))
        self._pending, self._pipelined = pending, pipelined
        busy = bool(result.binds or result.evictions or new_pipelined or changed)
        log.log(
            logging.INFO if busy else logging.DEBUG,
            "cycle %d: %d bound, %d pipelined, %d evicted, %d pending (%d with a new reason) in %.0f ms",
            number,
            len(result.binds),
            new_pipelined,
            len(result.evictions),
            len(pending),
            changed,
            result.stats.seconds * 1000,
            extra=fields(
                cycle=number,
                bound=len(result.binds),
                pipelined=new_pipelined,
                evicted=len(result.evictions),
                pending=len(pending),
                changed=changed,
                ms=round(result.stats.seconds * 1000, 1),
            ),
        )
