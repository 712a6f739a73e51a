"""kai-ray in process on a case, and how its outcome is compared with KAI's.

Both outcomes have the shape of ``kai-ray schedule -o json``. They agree when every pod
has the same status and node and fractional pods share their GPUs with the same other
pods (GPU group ids are random UUIDs in KAI, so only the grouping is compared).

Both schedulers break ties between equally scored nodes by name, so exact agreement is
the rule. Where KAI's own order is random (shared GPUs of equal score, nodes a victim
search visits) more than one answer is right; ``decision_diff`` then compares what was
decided: per job, how many pods reach each status on each *kind* of node (same
allocatable, labels and taints), and exactly which pods are evicted.
"""

from __future__ import annotations

import contextlib
import functools
import random
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from types import SimpleNamespace
from typing import Any
from unittest import mock

from coordinator.actions.consolidation import ConsolidationAction
from coordinator.actions.preempt import PreemptAction
from coordinator.actions.solver import JobSolver
from coordinator.actions.victims import VictimPool
from coordinator.job_order import ROOT, JobOrder
from coordinator.jobs import Job
from coordinator.tasks import Status, Task
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.deltas import ClusterDeltas
from kai_ray.io.config import config_from_mapping
from kai_ray.io.fields import parse_time
from kai_ray.io.snapshot_loader import snapshot_from_documents
from placement import scorers
from placement.placer import Mask
from placement.scorers import GpuSharingOrder, Ints, Scoring
from tests.oracle.harness import Oracle, OracleCrash, OracleTimeout
from tests.oracle.kai_fixes import PANIC_FIXES, FixedKai
from tests.oracle.kai_job_order import KaiHeapJobOrder
from tests.oracle.manifests import Case, Doc

Outcome = dict[str, Any]


def run_kai_ray(documents: list[Doc], config: Doc, actions: str, now: str) -> Outcome:
    """kai-ray's decisions for one session, exactly as `kai-ray schedule -o json` computes them."""
    settings = config_from_mapping(config)
    names = tuple(a.strip() for a in actions.split(",") if a.strip()) if actions else None
    if names is not None:
        spread = "spread" in (settings.placementStrategy.gpu, settings.placementStrategy.cpu)
        names = tuple(a for a in names if not (spread and a == "consolidation"))
    snapshot = snapshot_from_documents(list(documents), "<case>", settings.schedulerName)
    coordinator = in_process_coordinator(settings, 1)
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    result: Outcome = coordinator.cycle(parse_time(now), names).decisions.to_json()
    return result


def run_case(case: Case) -> Outcome:
    return run_kai_ray(case.documents, case.config, case.actions, case.now)


def _groups(outcome: Outcome) -> set[frozenset[str]]:
    """Which pods share a GPU: one set per (node, GPU group) of the outcome."""
    shared: dict[tuple[str, str], set[str]] = {}
    for key, pod in outcome["pods"].items():
        for group in pod.get("gpuGroups") or ():
            shared.setdefault((str(pod.get("node")), group), set()).add(key)
    return {frozenset(members) for members in shared.values()}


def exact_diff(kai: Outcome, ray: Outcome) -> list[str]:
    """Every pod whose status or node differs, and GPU sharing that differs."""
    diffs = []
    for key in sorted(set(kai["pods"]) | set(ray["pods"])):
        a, b = kai["pods"].get(key), ray["pods"].get(key)
        if a is None or b is None:
            diffs.append(f"{key}: only in {'kai-ray' if a is None else 'KAI'}")
            continue
        if (a["status"], a.get("node")) != (b["status"], b.get("node")):
            diffs.append(f"{key}: KAI {a['status']} {a.get('node')}, kai-ray {b['status']} {b.get('node')}")
    kai_groups, ray_groups = _groups(kai), _groups(ray)
    for members in sorted(kai_groups - ray_groups, key=sorted):
        diffs.append(f"GPU shared by {sorted(members)} in KAI only")
    for members in sorted(ray_groups - kai_groups, key=sorted):
        diffs.append(f"GPU shared by {sorted(members)} in kai-ray only")
    return diffs


def node_kinds(documents: list[Doc]) -> dict[str, str]:
    """Node name -> a kind: same allocatable, labels and taints, and pods of the same shapes on it
    when the session starts. Nodes of one kind score the same for every pod."""
    held: dict[str, list[str]] = {}
    for doc in documents:
        spec, status = doc.get("spec") or {}, doc.get("status") or {}
        if doc.get("kind") == "Pod" and spec.get("nodeName") and status.get("phase") not in ("Succeeded", "Failed"):
            requests = [c.get("resources", {}).get("requests", {}) for c in spec.get("containers", [])]
            fraction = (doc["metadata"].get("annotations") or {}).get("gpu-fraction")
            releasing = bool(doc["metadata"].get("deletionTimestamp"))
            held.setdefault(spec["nodeName"], []).append(repr((requests, fraction, releasing)))
    kinds = {}
    for doc in documents:
        if doc.get("kind") != "Node":
            continue
        meta, status = doc["metadata"], doc.get("status", {})
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != "kubernetes.io/hostname"}
        taints = (doc.get("spec") or {}).get("taints") or []
        signature = (sorted(status.get("allocatable", {}).items()), sorted(labels.items()), taints)
        kinds[meta["name"]] = repr((signature, sorted(held.get(meta["name"], []))))
    return kinds


def _job_of(documents: list[Doc]) -> dict[str, str]:
    jobs = {}
    for doc in documents:
        if doc.get("kind") == "Pod":
            meta = doc["metadata"]
            key = f"{meta.get('namespace', 'default')}/{meta['name']}"
            jobs[key] = (meta.get("annotations") or {}).get("pod-group-name") or key
    return jobs


def _decided(outcome: Outcome, kinds: Mapping[str, str], jobs: Mapping[str, str]) -> Counter[tuple[str, str, str]]:
    counts: Counter[tuple[str, str, str]] = Counter()
    for key, pod in outcome["pods"].items():
        node = pod.get("node")
        counts[(jobs.get(key, key), pod["status"], kinds.get(node, str(node)) if node else "-")] += 1
    return counts


def decision_diff(case_documents: list[Doc], kai: Outcome, ray: Outcome) -> list[str]:
    """Differences in what was decided, ignoring which of several equal nodes was picked."""
    kinds, jobs = node_kinds(case_documents), _job_of(case_documents)
    diffs = []
    kai_counts, ray_counts = _decided(kai, kinds, jobs), _decided(ray, kinds, jobs)
    for key in sorted(set(kai_counts) | set(ray_counts)):
        if kai_counts[key] != ray_counts[key]:
            job, status, _ = key
            diffs.append(f"job {job}: {status} on a node kind: KAI {kai_counts[key]}, kai-ray {ray_counts[key]}")
    evicted_kai = {k for k, p in kai["pods"].items() if p["status"] == "Releasing"}
    evicted_ray = {k for k, p in ray["pods"].items() if p["status"] == "Releasing"}
    if evicted_kai != evicted_ray:
        diffs.append(
            f"evicted: KAI only {sorted(evicted_kai - evicted_ray)}, kai-ray only {sorted(evicted_ray - evicted_kai)}"
        )
    return diffs


def verdict(case: Case, kai: Outcome, ray: Outcome) -> tuple[str, list[str]]:
    """("same" | "equivalent" | "mismatch", differences)."""
    exact = exact_diff(kai, ray)
    if not exact:
        return "same", []
    decided = decision_diff(case.documents, kai, ray)
    if not decided:
        return "equivalent", exact
    return "mismatch", decided + exact


# Differences README.md lists as deliberate, each with a test-only patch that makes kai-ray do
# what KAI v0.12 (the oracle) does instead. A disagreement that vanishes under one of them is
# that difference, and the verdict names it; the case files pin one example of each.
# Per job: running pods KAI's ``activeAllocatedCount`` lost to second evictions (see below).
_KAI_COUNT_LOST: Counter[str] = Counter()


def _evict_twice(solver: JobSolver, task: Task, preemptor: str) -> None:
    """KAI's by-pod solver evicts the recorded victims, then every victim of the latest victim
    job on a node, recorded ones included: a pod evicted twice is taken off its queue twice.
    The second eviction goes through a victim representative's clone of the pod, still marked
    ``Running``, and ``deleteTaskIndex`` (``pkg/scheduler/api/podgroup_info/job_info.go``) takes
    one off the job's active-allocated count for it: the count is one short while it stands."""
    stmt = solver.stmt
    if task.status.active_allocated:
        stmt.evict(task, solver.action, preemptor)
        return
    if task.status is not Status.RELEASING or not task.evicted_in_session:
        return
    job = stmt.jobs_by_task[task.key]
    stmt.queues.add_allocation(job.queue, task.accepted, job.preemptible, sign=-1.0)
    _KAI_COUNT_LOST[job.key] += 1
    stmt.undo_log.append(lambda: stmt.queues.add_allocation(job.queue, task.accepted, job.preemptible, sign=1.0))
    stmt.undo_log.append(lambda: _KAI_COUNT_LOST.subtract([job.key]))


def _counted_by_kai(victims: Callable[..., JobOrder]) -> Callable[..., JobOrder]:
    """Preempt's and consolidation's victims as KAI filters them (``GetActiveAllocatedTasksCount()
    == 0`` leaves a job out), with the count short by what second evictions took."""

    def filtered(action: object, state: object, pool: VictimPool, job: Job, request: object) -> JobOrder:
        def queue(accept_queue: Callable[[str], bool], accept_job: Callable[[Job], bool]) -> JobOrder:
            def counted(victim: Job) -> bool:
                return accept_job(victim) and victim.active_allocated() > _KAI_COUNT_LOST[victim.key]

            return pool.queue(accept_queue, counted)

        return victims(action, state, SimpleNamespace(queue=queue), job, request)

    return filtered


@contextlib.contextmanager
def _kai_double_eviction() -> Iterator[None]:
    """KAI's second eviction of a recorded victim: its queue's books and its job's count."""
    _KAI_COUNT_LOST.clear()
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch("coordinator.actions.solver.JobSolver._evict", _evict_twice))
        for action in (PreemptAction, ConsolidationAction):
            stack.enter_context(mock.patch.object(action, "victims", _counted_by_kai(action.victims)))
        yield
    _KAI_COUNT_LOST.clear()


def _department_parent(order: JobOrder, node: int) -> int:
    """KAI v0.12's job order knows two levels: a leaf queue's parent (a "department"), and one
    heap of every department, whatever queues are above them."""
    tree = order.queues.tree
    parent = int(tree.parent[node])
    return parent if parent >= 0 and tree.is_leaf(node) else ROOT


# Where kai-ray's actions make a job order.
_JOB_ORDER_USERS = (
    "coordinator.actions.allocate",
    "coordinator.actions.solver",
    "coordinator.actions.victim_search",
    "coordinator.actions.victims",
)


@contextlib.contextmanager
def _kai_heaps(map_seed: int = 0) -> Iterator[None]:
    """Every job order kai-ray's actions make is KAI v0.12's heaps, its map walks drawn from one
    seeded generator."""
    maker = functools.partial(KaiHeapJobOrder, map_order=random.Random(map_seed))
    with contextlib.ExitStack() as stack:
        for module in _JOB_ORDER_USERS:
            stack.enter_context(mock.patch(f"{module}.JobOrder", maker))
        yield


class _SharedGpuBonusForCpuPods(GpuSharingOrder):
    """KAI v0.12's ``gpusharingorder``: its points go to any pod that fits beside a GPU group in
    use on the node, so a CPU-only pod (which asks no GPU memory) earns them on every node with a
    shared GPU that holds an active or pipelined fraction."""

    def applies(self, scoring: Scoring) -> bool:
        return scoring.gpu == "binpack" and (scoring.shape.share is not None or scoring.shape.is_cpu_only)

    def rows(self, scoring: Scoring, rows: Ints, now: Mask, mib: Ints | None) -> Mask:
        return scoring.table.room_future[rows] >= (0 if mib is None else mib)

    def row(self, scoring: Scoring, row: int, now: bool, mib: int | None) -> bool:
        return bool(scoring.table.room_future[row] >= (0 if mib is None else mib))


def _kai_sharing_bonus() -> AbstractContextManager[object]:
    kai = tuple(_SharedGpuBonusForCpuPods() if isinstance(s, GpuSharingOrder) else s for s in scorers.BAND_SCORERS)
    return mock.patch.object(scorers, "BAND_SCORERS", kai)


DELIBERATE: dict[str, Callable[[], AbstractContextManager[object]]] = {
    # KAI v0.12 puts every preemptible job of another queue in reclaim's victims queue and only
    # validates the pods it really evicts, so reclaim may move (re-place) pods of a queue within
    # its quota; KAI v0.17 and kai-ray filter victims by queue first.
    "reclaim-victim-filter": lambda: mock.patch(
        "coordinator.actions.reclaim.may_reclaim_from", lambda *args, **kwargs: True
    ),
    # KAI takes back a victim's eviction from the node it was last pipelined to even when the
    # search found it room on another node that lists it, without checking that it still fits
    # there; kai-ray does that only where it fits.
    "unevict-where-it-fits": lambda: mock.patch(
        "coordinator.actions.allocate._uneviction_fits", lambda *args, **kwargs: True
    ),
    # KAI evicts a recorded victim a second time when the victims of a node include it, and takes
    # its resources off its queue twice: a later capacity check then passes on a queue over its
    # limit. The second eviction also takes one off the job's count of running pods, so a job
    # with a pod still running can drop out of later preempt and consolidation searches.
    # kai-ray evicts a pod once.
    "evict-once": _kai_double_eviction,
    # KAI v0.12's job order (``buildActiveJobOrderPriorityQueues``) puts each leaf queue's parent
    # in one heap of departments and never compares the levels above them; kai-ray orders the
    # queue tree from its top, at any depth.
    "job-order-two-levels": lambda: mock.patch("coordinator.job_order.JobOrder._parent", _department_parent),
    # KAI v0.12 orders departments by the queue on top of each department's heap, re-placed only
    # when it comes up flagged, so a department can be judged by the queue it just served
    # (``buildFuncOrderBetweenDepartmentsWithJobs`` in
    # ``pkg/scheduler/actions/utils/job_order_by_queue.go``); kai-ray by its best queue.
    "stale-department-heap": _kai_heaps,
    # KAI v0.12 gives the shared-GPU bonus to CPU-only pods too, on nodes with a shared GPU in use
    # (``gpusharingorder``: ``IsTaskFitOnGpuGroup`` holds for a pod that asks no GPU memory);
    # later KAI and kai-ray give it to fractions only.
    "shared-gpu-bonus": _kai_sharing_bonus,
}


def explain(case: Case, kai_outcomes: list[Outcome]) -> str | None:
    """The deliberate difference that accounts for kai-ray's disagreement with KAI, if one does."""
    for name, ray in patched_runs(case):
        if any(verdict(case, kai, ray)[0] != "mismatch" for kai in kai_outcomes):
            return name
    return None


def patched_runs(case: Case) -> Iterator[tuple[str, Outcome]]:
    """kai-ray's outcome under each deliberate difference's patch, by the patch's name."""
    for name, patch in DELIBERATE.items():
        with patch():
            yield name, run_case(case)


def _compared_without_the_panic(case: Case, ray: Outcome, fixed: FixedKai) -> str | None:
    """KAI panicked: the verdict KAI with its panic fixed (and maybe other bugs) gives, against
    kai-ray as it is or under one deliberate difference's patch, or None."""
    rays = [("", ray), *patched_runs(case)]
    found = fixed.explain(
        case, lambda answer: any(verdict(case, answer, r)[0] != "mismatch" for _, r in rays), PANIC_FIXES
    )
    if found is None:
        return None
    fixes, answer = found
    patch = next(name for name, r in rays if verdict(case, answer, r)[0] != "mismatch")
    return f"kai-bug:{fixes}" + (f" with deliberate {patch}" if patch else "")


VARYING_RERUNS = 200


def check(
    oracle: Oracle, case: Case, reruns: int = 30, fixed: FixedKai | None = None
) -> tuple[str, list[str], Outcome | None, Outcome]:
    """Run both on ``case``: (verdict, differences, KAI's outcome, kai-ray's outcome).

    KAI's own decisions can vary from run to run (it walks Go maps in places, e.g. the nodes
    of a victim job, where a pending pod adds an empty node name), so a disagreement is re-run
    through KAI up to ``reruns`` times: if any run decides as kai-ray did, the verdict is
    "kai-varies" (kai-ray gave one of KAI's answers). Thirty, not ten: a consolidation case
    where KAI picks kai-ray's answer about half the time was once called a mismatch after
    eleven KAI runs in a row picked the other (seed 100018); a run costs milliseconds. A
    disagreement a deliberate difference explains is "deliberate:<name>". Where those runs
    already gave KAI more than one answer, it is sampled up to ``VARYING_RERUNS`` times: on a
    contended consolidation (seed 700009, departments ordered by a stale queue heap) kai-ray's
    answer is one KAI gives about one run in twenty, and thirty runs missed it one time in five.
    "kai-hang": KAI's session did not end (its v0.12 victim search can loop); "kai-crash":
    KAI's code panicked. With ``fixed`` (KAI built with fixes to its own bugs), a disagreement
    left over is "kai-bug:<fixes>" when KAI with those fixes on decides as kai-ray did, and so
    is a panic when KAI with its panic fixed (and maybe other fixes) decides as kai-ray did, or as
    kai-ray under a deliberate difference's patch ("kai-bug:<fixes> with deliberate <patch>")."""
    ray = run_case(case)
    try:
        kai = oracle.run(case.documents, case.config, case.actions, case.now, case_id=case.case_id)
        result, diffs = verdict(case, kai, ray)
        if result != "mismatch":
            return result, diffs, kai, ray
        seen, answers = [kai], [kai]  # every KAI run, and one of each different decision
        while len(seen) <= reruns or (len(seen) <= VARYING_RERUNS and len(answers) > 1):
            again = oracle.run(case.documents, case.config, case.actions, case.now, case_id=case.case_id)
            if verdict(case, again, ray)[0] != "mismatch":
                return "kai-varies", diffs, again, ray
            seen.append(again)
            if all(verdict(case, again, other)[0] == "mismatch" for other in answers):
                answers.append(again)
    except OracleTimeout as error:
        return "kai-hang", [str(error)], None, ray
    except OracleCrash as error:
        # KAI's own panic (a nil scenario in its idle-GPU filter, from a stale cache of a job's
        # pods to place): KAI with a fix that avoids it may still be compared.
        bug = _compared_without_the_panic(case, ray, fixed) if fixed else None
        return (bug or "kai-crash"), [str(error)], None, ray
    reason = explain(case, seen)
    if reason:
        return f"deliberate:{reason}", diffs, kai, ray
    found = fixed.explain(case, lambda answer: verdict(case, answer, ray)[0] != "mismatch") if fixed else None
    return (f"kai-bug:{found[0]}" if found else "mismatch"), diffs, kai, ray
