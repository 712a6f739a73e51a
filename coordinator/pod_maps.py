"""What a cycle tells the adapter about membership: each pod's queue and job, and the gangs whose
pods are not all created. Both follow from which pods and jobs exist, so they are kept and
worked out again only where the session cache says something changed."""

from __future__ import annotations

from coordinator.session import SessionState

Maps = tuple[dict[str, str], dict[str, str]]  # pod -> queue, pod -> job ("" for none)


class PodMaps:
    def __init__(self) -> None:
        self._kept: tuple[int, Maps] | None = None  # the session cache's membership count, the maps

    def of(self, state: SessionState) -> Maps:
        """Each pod's queue and job: the same count of membership changes, the same maps; where
        the opener says which pods changed, the last maps with those pods' entries done again (a
        copy: a result's maps never change afterwards)."""
        kept = self._kept
        if kept is not None and state.membership is not None and kept[0] == state.membership:
            return kept[1]
        if kept is not None and state.membership is not None and state.changed_pods is not None:
            pod_queues, pod_jobs = dict(kept[1][0]), dict(kept[1][1])
            for key in state.changed_pods:
                job = state.jobs_by_task.get(key)
                if job is not None:
                    pod_queues[key], pod_jobs[key] = job.queue, job.key
                    continue
                pod_queues.pop(key, None)
                if key in state.tasks:
                    pod_jobs[key] = ""
                else:
                    pod_jobs.pop(key, None)
        else:
            pod_queues = {key: job.queue for key, job in state.jobs_by_task.items()}
            pod_jobs = {key: job.key for key, job in state.jobs_by_task.items()}
            pod_jobs.update((key, "") for key in state.tasks if key not in state.jobs_by_task)
        self._kept = None if state.membership is None else (state.membership, (pod_queues, pod_jobs))
        return pod_queues, pod_jobs


def not_ready_gangs(state: SessionState, touched: set[str]) -> frozenset[str]:
    """The gangs whose pods are not all created (or alive) at the end of the session: as the
    opener counted them, except for the jobs the session may have changed (``touched``: the jobs
    its statements changed)."""
    at_open = state.not_ready_at_open
    if at_open is None:
        return frozenset(k for k, j in state.jobs.items() if not j.ready_for_scheduling())
    changed = list(state.maybe_changed_jobs(touched))
    keys = {job.key for job in changed}
    now_short = {job.key for job in changed if not job.ready_for_scheduling()}
    return frozenset(k for k in at_open if k not in keys) | now_short
