"""What each KAI scale scenario does on its cluster and when it is done (``kai_scale_run.Run``).

Each function sets the scenario up (not timed), opens the measured window, waits for the
scenario's done condition within the scenario's timeout, and fills the outcome: ``seconds`` is
the scenario's figure as KAI reports it, ``pods``/``done`` what it waited for.
"""

from __future__ import annotations

import time

from loadtests.kai_scale_run import Obj, Outcome, Run, Steps, Window
from loadtests.kai_scale_scenarios import (
    DISTRIBUTED_PODS,
    GPUS_PER_NODE,
    RECLAIM,
    SANITY,
    TOPOLOGY_LEVELS,
    distributed_job,
    nodes,
    pod,
    queues,
    single_gpu_jobs,
    topology,
    topology_nodes,
)
from loadtests.kai_scale_state import GROUPS, PODS

# KAI's Reclaim context gives the filling queue no quota and no share of what is over quota, so
# another queue reclaims every GPU it holds.
RECLAIMABLE = (0.0, 0.0, -1.0)


def _names(objects: list[Obj]) -> list[str]:
    return [o["metadata"]["name"] for o in objects if o["kind"] == "Pod"]


async def _preloaded(run: Run, outcome: Outcome, pods: list[str]) -> None:
    """The pods exist, the scheduler is off: time from its start until every pod is bound."""
    await run.settled(len(run.created))
    window = Window(run)
    await window.open()
    started = await run.start_scheduler()
    window.track()
    await _all_bound(run, outcome, window, pods, started)


async def _all_bound(run: Run, outcome: Outcome, window: Window, pods: list[str], since: float) -> None:
    """Wait until every one of ``pods`` is bound, close ``window``, and record the time from
    ``since`` to the last bind (or that the scenario timed out)."""
    done = await run.until(lambda: run.bound(pods) == len(pods), since + run.timeout)
    await window.close(outcome)
    outcome.pods, outcome.done = len(pods), run.bound(pods)
    if done:
        outcome.seconds = max(run.watch.bound_at[n] for n in pods) - since
    else:
        outcome.status = "timed out"


async def fill(run: Run, outcome: Outcome) -> None:
    """N nodes, N x 8 one-GPU jobs in one queue created with the scheduler off."""
    jobs = single_gpu_jobs(SANITY, run.size.gpus, SANITY, run.system.scheduler_name)
    await run.create([*queues(), *nodes(run.size.nodes), *jobs])
    await _preloaded(run, outcome, _names(jobs))


async def topology_gang(run: Run, outcome: Outcome) -> None:
    """Nodes in zones/blocks/racks of two; one gang of a pod per node, 2 GPUs each, preferring a rack."""
    count = run.size.topology_nodes
    job = distributed_job("topology-job", SANITY, count, 2, run.system.scheduler_name, TOPOLOGY_LEVELS[2][0])
    await run.create([*queues(), *topology_nodes(run.size), topology(), *job])
    await _preloaded(run, outcome, _names(job))


async def infeasible(run: Run, outcome: Outcome) -> None:
    """The cluster full of one queue's one-GPU jobs, its quota then all but one GPU short of the
    cluster less a 10 x 8-GPU distributed job; such a job of another queue, once per sample, can
    reclaim only all but one GPU it needs: time until its PodGroup is reported unschedulable."""
    scheduler = run.system.scheduler_name
    await run.create([*queues(RECLAIMABLE), *nodes(run.size.nodes)])
    await run.fill(single_gpu_jobs(SANITY, run.size.gpus, SANITY, scheduler))
    await run.patch_queue(SANITY, {"resources": {"gpu": {"quota": run.size.infeasible_quota}}})
    window = Window(run)
    await window.open()
    outcome.pods = run.size.samples
    for sample in range(run.size.samples):
        name = f"infeasible-{sample}"
        job = distributed_job(name, RECLAIM, DISTRIBUTED_PODS, GPUS_PER_NODE, scheduler)
        created = time.monotonic()
        await run.create(job)
        if not await run.until_in(run.groups.unschedulable_at, name, created + run.timeout):
            outcome.status = "timed out"
            break
        outcome.samples.append(run.groups.unschedulable_at[name] - created)
        await run.delete(PODS, _names(job))
        await run.delete(GROUPS, [name])
    await window.close(outcome)
    outcome.done = len(outcome.samples)
    if outcome.samples and outcome.status == "ok":
        outcome.seconds = sum(outcome.samples) / len(outcome.samples)


async def reclaim_one(run: Run, outcome: Outcome) -> None:
    """The cluster full of one queue's one-GPU jobs; another queue submits one one-GPU job at a
    time: time until it is bound, averaged over the samples."""
    scheduler = run.system.scheduler_name
    await run.create([*queues(RECLAIMABLE), *nodes(run.size.nodes)])
    await run.fill(single_gpu_jobs(SANITY, run.size.gpus, SANITY, scheduler))
    window = Window(run)
    await window.open()
    outcome.pods = run.size.samples
    for sample in range(run.size.samples):
        name = f"{RECLAIM}-{sample:05d}"
        created = time.monotonic()
        await run.create([pod(name, RECLAIM, 1, scheduler)])
        if not await run.until_in(run.watch.bound_at, name, created + run.timeout):
            outcome.status = "timed out"
            break
        outcome.samples.append(run.watch.bound_at[name] - created)
    await window.close(outcome)
    outcome.done = len(outcome.samples)
    if outcome.samples and outcome.status == "ok":
        outcome.seconds = sum(outcome.samples) / len(outcome.samples)


async def reclaim_large(run: Run, outcome: Outcome) -> None:
    """The cluster full of one queue's full-node jobs; another queue submits one distributed job
    of a full-node pod per node: time from its creation until its last pod is bound."""
    scheduler = run.system.scheduler_name
    await run.create([*queues(RECLAIMABLE), *nodes(run.size.nodes)])
    await run.fill(single_gpu_jobs(SANITY, run.size.nodes, SANITY, scheduler, gpus=GPUS_PER_NODE))
    job = distributed_job("reclaim-large", RECLAIM, run.size.nodes, GPUS_PER_NODE, scheduler)
    pods = _names(job)
    window = Window(run)
    await window.open()
    created = time.monotonic()
    await run.create(job)
    await _all_bound(run, outcome, window, pods, created)


async def reclaim_many(run: Run, outcome: Outcome) -> None:
    """The cluster full of one queue's one-GPU jobs; with the scheduler off, another queue
    submits as many: time from the scheduler's start until all of them are bound."""
    scheduler = run.system.scheduler_name
    await run.create([*queues(RECLAIMABLE), *nodes(run.size.nodes)])
    await run.fill(single_gpu_jobs(SANITY, run.size.gpus, SANITY, scheduler))
    await run.stop_scheduler()
    jobs = single_gpu_jobs(RECLAIM, run.size.gpus, RECLAIM, scheduler)
    await run.create(jobs)
    await _preloaded(run, outcome, _names(jobs))


STEPS: dict[str, Steps] = {
    "fill": fill,
    "topology": topology_gang,
    "infeasible": infeasible,
    "reclaim-one": reclaim_one,
    "reclaim-large": reclaim_large,
    "reclaim-many": reclaim_many,
}
