"""Seeded random clusters as Kubernetes manifests, the input both kai-ray and the KAI oracle read.

One seed gives one ``Case``: nodes with whole and shared GPUs, a queue tree with quotas,
weights, limits and priorities, priority classes, running, terminating and pending jobs
(gangs, elastic jobs, sub-groups, fractions, CPU jobs, node affinity), the time-stamps that
decide minimum runtime and stale gangs, a scheduler config and the actions to run. Every
running pod was placed by a first-fit packer that respects the node's capacity (shared GPUs
and their reservation pod slots included), so the cluster is one a real scheduler could
have left behind.

The seed also picks a *focus* (``FOCI``): the action whose situations the cluster is
steered towards, so that each action meets clusters where it has something to do. The
``CONTENDED_FOCI`` draw full clusters with deeper queue trees instead (``contended.py``).

Times avoid the edges: runtimes and staleness ages are never within a minute or 20 s of
the thresholds they are compared with, so a few seconds of wall-clock drift in the oracle
cannot tip a decision.
"""

from __future__ import annotations

import random

from tests.coordinator.random_clusters import _NodeRoom as Room  # the same first-fit packer
from tests.oracle.contended import CONTENDED_FOCI, generate_contended
from tests.oracle.manifests import (
    GIB,
    NODE_KINDS,
    PRIORITY_CLASSES,
    Case,
    Doc,
    Job,
    node,
    pod_group,
    pods,
    priority_classes,
    queue,
)

FOCI = ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction", "all")
EVICTING = ("consolidation", "reclaim", "preempt", "all")  # foci whose actions pick victims
ALL_ACTIONS = "allocate,consolidation,reclaim,preempt,stalegangeviction"


def _resources(rng: random.Random, kind: str) -> Doc:
    def one(quota: float, weight: float, limit: float) -> Doc:
        return {"quota": quota, "overQuotaWeight": weight, "limit": limit}

    if kind == "department":
        gpu = one(rng.choice((-1, 0, 4, 8, 16)), rng.choice((1, 1, 2, 0)), rng.choice((-1, -1, 6, 12)))
    else:
        gpu = one(rng.choice((0, 0, 1, 2, 4, 8)), rng.choice((1, 1, 2, 0)), rng.choice((-1, -1, -1, 4, 8)))
    cpu = one(-1, 1, -1) if rng.random() < 0.8 else one(rng.choice((8000, 32000)), 1, rng.choice((-1, 48000)))
    memory = one(-1, 1, -1)
    return {"gpu": gpu, "cpu": cpu, "memory": memory}


def _queues(rng: random.Random, focus: str) -> tuple[list[Doc], list[str]]:
    # Two levels, departments above leaf queues: KAI v0.12 (the oracle) schedules only leaf queues
    # whose parent is a top-level queue (a case file pins the other shapes).
    departments = rng.choice((1, 1, 2))
    leaves = rng.randint(2 if focus == "reclaim" else 1, 4)
    docs: list[Doc] = []
    for i in range(departments):
        docs.append(queue(f"dept{i}", None, rng.choice((100, 100, 200)), _resources(rng, "department"), i))
    names = []
    for i in range(leaves):
        parent = f"dept{rng.randrange(departments)}" if departments else None
        names.append(f"q{i}")
        priority = rng.choice((100, 100, 100, 50, 200))
        docs.append(queue(f"q{i}", parent, priority, _resources(rng, "leaf"), departments + i))
        if rng.random() < 0.15:
            spec = docs[-1]["spec"]
            spec[rng.choice(("preemptMinRuntime", "reclaimMinRuntime"))] = rng.choice(("5m", "30m"))
    return docs, names


def _job(rng: random.Random, index: int, leaves: list[str], focus: str, shapes: tuple[str, ...]) -> Job:
    pods = rng.choice((1, 1, 1, 2, 2, 3, 4))
    shape = rng.choice(shapes)
    if focus == "consolidation" and rng.random() < 0.6:
        shape = "whole"
    gpus = rng.choice((1, 1, 2, 4, 8)) if shape == "whole" else 0
    fraction = rng.choice((0.5, 0.25, 0.75)) if shape == "fraction" else None
    classes = list(PRIORITY_CLASSES)
    if focus in ("consolidation", "reclaim"):
        classes = ["train", "train", "build-preemptible", "build"]
    sub_groups: list[tuple[str, int]] = []
    if pods >= 2 and rng.random() < 0.15:
        sub_groups = [("a", rng.randint(1, (pods + 1) // 2)), ("b", rng.randint(0, pods // 2))]
        min_member = sum(m for _, m in sub_groups)
    else:
        min_member = rng.randint(1, pods)
    running = rng.choice((0, 0, pods, pods, min_member, max(min_member - 1, 0)))
    if focus in ("reclaim", "preempt", "consolidation") and rng.random() < 0.4:
        running = pods
    releasing = rng.choice((0, 0, 0, 0, 1)) if running < pods else 0
    preemptibility = rng.choice((None, None, None, None, "preemptible", "non-preemptible"))
    if shape == "fraction" and focus in EVICTING:
        # Shared-GPU pods are never victims here: KAI v0.12's books for a shared GPU whose pods
        # are evicted or moved in a victim search go out of balance (a case file pins one).
        preemptibility = "non-preemptible"
    job = Job(
        name=f"j{index}",
        queue=rng.choice(leaves),
        priority_class=rng.choice(classes),
        preemptibility=preemptibility,
        pods=pods,
        min_member=min_member,
        shape=shape,
        gpus=gpus,
        fraction=fraction,
        cpu=rng.choice((500, 2000, 4000, 8000)),
        memory=rng.choice((1, 4, 16, 32)) * GIB,
        age_minutes=10 + 7 * index + rng.randint(0, 5),
        running=running,
        releasing=min(releasing, pods - running),
        affinity_pool=rng.choice((None, None, None, None, "a", "b")),
        sub_groups=sub_groups,
    )
    if running:
        job.runtime_minutes = rng.choice((1, 2, 3, 8, 15, 20, 45, 90))
    stale_candidate = running and (running < min_member or focus == "stalegangeviction")
    if stale_candidate and rng.random() < 0.8:
        job.stale_seconds = rng.choice((10, 30, 100, 300, 900))
    return job


def _place(rng: random.Random, job: Job, rooms: dict[str, Room], pools: dict[str, str]) -> None:
    order = sorted(rooms)
    rng.shuffle(order)
    if job.affinity_pool:
        order = [n for n in order if pools[n] == job.affinity_pool]
    for _ in range(job.running + job.releasing):
        for name in order:
            group = rooms[name].take(job.cpu, job.memory, job.gpus, job.fraction, name)
            if group is not None:
                job.placed.append((name, group))
                break


# The plugins kai-ray leaves out when a config turns them off (kai_ray.plugins.SWITCHABLE).
SWITCHABLE_PLUGINS = ("priority", "elastic", "minruntime", "nodeavailability", "resourcetype", "gpusharingorder")


def _config(rng: random.Random, focus: str) -> tuple[Doc, str]:
    config: Doc = {"kValue": 0}
    roll = rng.random()
    if roll < 0.12:
        config["placementStrategy"] = {"gpu": "spread", "cpu": "binpack"}
    elif roll < 0.2:
        config["placementStrategy"] = {"gpu": "binpack", "cpu": "spread"}
    if rng.random() < 0.25:
        config["defaultPreemptMinRuntime"] = rng.choice(("5m", "10m"))
    if rng.random() < 0.25:
        config["defaultReclaimMinRuntime"] = rng.choice(("5m", "10m"))
    if focus == "stalegangeviction" and rng.random() < 0.3:
        config["defaultStalenessGracePeriod"] = rng.choice(("60s", "200s"))
    if rng.random() < 0.2:  # drawn last: the rolls above, and so older seeds' configs, stay as they were
        config["plugins"] = _plugins(rng)
    actions = ALL_ACTIONS if focus == "all" else focus
    return config, actions


def _plugins(rng: random.Random) -> Doc:
    """KAI plugins turned off, or the elastic job order asked before priority's."""
    plugins: Doc = {name: {"enabled": False} for name in rng.sample(SWITCHABLE_PLUGINS, rng.randint(1, 2))}
    if rng.random() < 0.3:
        plugins["elastic"] = {"priority": 1750}
    return plugins


def generate(seed: int, focus: str | None = None) -> Case:
    """The cluster of ``seed``; ``focus`` one of ``FOCI`` or ``CONTENDED_FOCI`` (by seed when
    None), or "contended": one of ``CONTENDED_FOCI`` by seed."""
    if focus == "contended":
        focus = CONTENDED_FOCI[seed % len(CONTENDED_FOCI)]
    if focus in CONTENDED_FOCI:
        return generate_contended(seed, focus)
    rng = random.Random(seed)
    focus = focus or FOCI[seed % len(FOCI)]
    documents: list[Doc] = priority_classes()
    rooms: dict[str, Room] = {}
    pools: dict[str, str] = {}
    for i in range(rng.randint(2, 6)):
        kind = rng.choice(("gpu8", "gpu8", "gpu4", "gpu4", "gpu2", "cpu"))
        name, pool = f"node-{i}", rng.choice(("a", "b"))
        slots = 110  # generous: pod-slot accounting differs on purpose (a case file pins it)
        documents.append(node(name, kind, pool, slots, rng.choice((40960, 81920))))
        gpus, cpu, memory = NODE_KINDS[kind]
        rooms[name] = Room(cpu, memory * GIB, gpus, slots)
        pools[name] = pool
    queue_docs, leaves = _queues(rng, focus)
    documents.extend(queue_docs)
    # CPU-only pods and shared GPUs never meet in one cluster: KAI v0.12 gives CPU-only pods the
    # shared-GPU bonus on nodes with a shared GPU (fixed in later KAI; a case file pins it).
    shapes = ("whole",) * 4 + (rng.choice(("fraction", "cpu")),)
    for index in range(rng.randint(2, 9)):
        job = _job(rng, index, leaves, focus, shapes)
        if job.running or job.releasing:
            _place(rng, job, rooms, pools)
        if job.runtime_minutes is not None and not job.placed:
            job.runtime_minutes = None
        documents.append(pod_group(job))
        documents.extend(pods(job))
    config, actions = _config(rng, focus)
    return Case(seed, focus, documents, config, actions)
