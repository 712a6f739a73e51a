"""Contended clusters: full before the session starts, with deep queue trees and shared GPUs.

The base clusters (``clusters.py``) start mostly empty, so a victim search rarely has a
choice to make. Here running jobs fill most of the GPUs first, spread over queues so that
some are over their quota and some under, and then the pending jobs of one action's kind
arrive:

- queue trees of two or three levels (departments under top-level queues), with priorities,
  limits and over-quota weights at every level;
- GPU nodes labelled with a GPU type (its memory), pods that select a type by node selector
  or node affinity, fractional pods asking a fraction (``gpu-fraction``) or a size
  (``gpu-memory``) of a GPU;
- running preemptible and non-preemptible jobs, elastic ones (fewer pods needed than run),
  some young enough for a minimum runtime to protect them.

One focus per action (``CONTENDED_FOCI``); the cluster's pending jobs are the kind that
action acts on: any job for allocate, a job whose queue is under its quota for reclaim, a
job above the running ones' priority in their queue for preempt, preemptible jobs that fit
only if running ones move for consolidation.

What the base clusters leave out stays out here, for the same reasons (each is a deliberate
difference with its case file): leaf queues without a parent, CPU-only pods beside shared
GPUs, shared-GPU pods as victims, pod slots that run out.
"""

from __future__ import annotations

import random

from tests.coordinator.random_clusters import _NodeRoom as Room  # the same first-fit packer
from tests.oracle.manifests import GIB, NODE_KINDS, Case, Doc, Job, node, pod_group, pods, priority_classes, queue

CONTENDED_FOCI = ("contended-allocate", "contended-consolidation", "contended-reclaim", "contended-preempt")
GPU_TYPES = {"a100": 40960, "h100": 81920}  # the gpu-type label -> each GPU's memory (MiB)
PREEMPTIBLE_CLASSES = ("train", "build-preemptible")  # below 100: preemptible by default
NON_PREEMPTIBLE_CLASSES = ("build", "inference")


class _Nodes:
    """The cluster's nodes as the packer sees them, with the labels pods select by."""

    def __init__(self, rng: random.Random, with_cpu_nodes: bool) -> None:
        self.rooms: dict[str, Room] = {}
        self.labels: dict[str, dict[str, str]] = {}
        self.documents: list[Doc] = []
        kinds = ("gpu8", "gpu8", "gpu4", "gpu4", "gpu2") + (("cpu",) if with_cpu_nodes else ())
        for i in range(rng.randint(3, 7)):
            kind, name = rng.choice(kinds), f"node-{i}"
            gpu_type = rng.choice(tuple(GPU_TYPES))
            pool = rng.choice(("a", "b"))
            labels = {"pool": pool, "gpu-type": gpu_type} if kind != "cpu" else {"pool": pool}
            self.documents.append(node(name, kind, pool, 110, GPU_TYPES[gpu_type], labels))
            gpus, cpu, memory = NODE_KINDS[kind]
            self.rooms[name] = Room(cpu, memory * GIB, gpus, 110)
            self.labels[name] = labels

    @property
    def gpus(self) -> int:
        return sum(NODE_KINDS[doc["metadata"]["labels"]["node-kind"]][0] for doc in self.documents)

    def free_gpus(self) -> float:
        return sum(room.whole_gpus + sum(1 - used for used in room.shared.values()) for room in self.rooms.values())

    def place(self, rng: random.Random, job: Job) -> None:
        """First fit, in a random node order, of the job's running and releasing pods."""
        order = sorted(self.rooms)
        rng.shuffle(order)
        order = [n for n in order if _selects(job, self.labels[n])]
        wanted = job.running + job.releasing
        for _ in range(wanted):
            for name in order:
                fraction = job.fraction
                if job.gpu_memory_mib is not None:
                    fraction = job.gpu_memory_mib / GPU_TYPES[self.labels[name]["gpu-type"]]
                group = self.rooms[name].take(job.cpu, job.memory, job.gpus, fraction, name)
                if group is not None:
                    job.placed.append((name, group))
                    break
        job.running = min(job.running, len(job.placed))
        job.releasing = len(job.placed) - job.running


def _selects(job: Job, labels: dict[str, str]) -> bool:
    if job.affinity_pool and labels.get("pool") != job.affinity_pool:
        return False
    if job.shape != "cpu" and "gpu-type" not in labels:
        return False
    return all(labels.get(k) == v for k, v in (job.node_selector or {}).items())


def _gpu(rng: random.Random, quotas: tuple[float, ...], limit_over: tuple[float, ...]) -> Doc:
    quota = rng.choice(quotas)
    over = rng.choice(limit_over)
    limit = -1 if over < 0 else max(quota, 0) + over
    return {"quota": quota, "overQuotaWeight": rng.choice((0, 1, 1, 1, 2, 3)), "limit": limit}


def _resources(gpu: Doc) -> Doc:
    return {
        "gpu": gpu,
        "cpu": {"quota": -1, "overQuotaWeight": 1, "limit": -1},
        "memory": {"quota": -1, "overQuotaWeight": 1, "limit": -1},
    }


def _tree(rng: random.Random, gpus: int) -> tuple[list[Doc], list[str]]:
    """Two or three levels; every leaf queue has a parent (KAI v0.12 schedules no others)."""
    eighth = max(gpus // 8, 1)
    docs: list[Doc] = []
    order = 0

    def add(name: str, parent: str | None, priority: int, gpu: Doc) -> None:
        nonlocal order
        docs.append(queue(name, parent, priority, _resources(gpu), order))
        order += 1

    parents: list[str] = []
    if rng.random() < 0.4:  # three levels: top-level queues, departments, leaves
        tops = [f"org{i}" for i in range(rng.randint(1, 2))]
        for name in tops:
            add(name, None, rng.choice((100, 100, 200)), _gpu(rng, (-1, 4 * eighth, 6 * eighth), (-1, -1, 2 * eighth)))
        for i in range(rng.randint(2, 3)):
            parents.append(f"dept{i}")
            gpu = _gpu(rng, (0, 2 * eighth, 3 * eighth, 4 * eighth), (-1, -1, 0, 2 * eighth))
            add(parents[-1], rng.choice(tops), rng.choice((100, 100, 50, 200)), gpu)
    else:
        for i in range(rng.randint(1, 3)):
            parents.append(f"dept{i}")
            gpu = _gpu(rng, (-1, 2 * eighth, 4 * eighth, 6 * eighth), (-1, -1, 0, 2 * eighth))
            add(parents[-1], None, rng.choice((100, 100, 50, 200)), gpu)
    leaves = []
    for i in range(rng.randint(2, 5)):
        leaves.append(f"q{i}")
        gpu = _gpu(rng, (0, eighth, eighth, 2 * eighth, 4 * eighth), (-1, -1, -1, 0, eighth, 2 * eighth))
        add(leaves[-1], parents[i] if i < len(parents) else rng.choice(parents), rng.choice((100, 100, 50, 200)), gpu)
    return docs, leaves


class _Jobs:
    """Draws the cluster's jobs one by one, numbering them in creation order."""

    def __init__(self, rng: random.Random, action: str, side_shape: str, max_gpus: int) -> None:
        self.rng, self.action, self.side_shape, self.max_gpus = rng, action, side_shape, max_gpus
        self.count = 0

    def draw(self, queue_name: str, running: bool, preemptible: bool | None, big: bool = False) -> Job:
        rng = self.rng
        shape = rng.choice(("whole", "whole", "whole", self.side_shape))
        if self.action == "consolidation" and preemptible:
            shape = "whole"  # only whole-GPU pods are moved here (shared-GPU victims stay out)
        pods = rng.choice((1, 1, 2, 2, 3, 4))
        sizes = tuple(g for g in ((2, 4, 4, 8) if big else (1, 1, 2, 2, 4)) if g <= self.max_gpus) or (1,)
        if self.action == "consolidation" and running:
            sizes = (1, 1, 2)  # small pods, scattered: the room a pending job needs is in pieces
        gpus = rng.choice(sizes) if shape == "whole" else 0
        if shape == "fraction" and rng.random() < 0.4:
            shape = "memory"
        if shape in ("fraction", "memory") and self.action != "allocate":
            preemptible = False  # shared-GPU pods are never victims (KAI v0.12's books, a case file)
        if preemptible is None:
            preemptible = rng.random() < 0.6
        classes = PREEMPTIBLE_CLASSES if preemptible else NON_PREEMPTIBLE_CLASSES
        elastic = pods > 1 and rng.random() < 0.4
        job = Job(
            name=f"j{self.count}",
            queue=queue_name,
            priority_class=rng.choice(classes),
            preemptibility=rng.choice((None, None, "preemptible" if preemptible else "non-preemptible")),
            pods=pods,
            min_member=rng.randint(1, pods - 1) if elastic else pods,
            shape=shape,
            gpus=gpus,
            fraction=rng.choice((0.25, 0.5, 0.75)) if shape == "fraction" else None,
            cpu=rng.choice((500, 2000, 4000)),
            memory=rng.choice((1, 4, 16)) * GIB,
            age_minutes=10 + 7 * self.count + rng.randint(0, 5),
            running=pods if running else 0,
            releasing=0,
            affinity_pool=rng.choice((None, None, None, None, "a", "b")),
            gpu_memory_mib=rng.choice((10240, 20480)) if shape == "memory" else None,
        )
        if shape != "cpu" and rng.random() < (0.6 if shape in ("fraction", "memory") else 0.3):
            if rng.random() < 0.5:
                job.node_selector = {"gpu-type": rng.choice(tuple(GPU_TYPES))}
            elif job.affinity_pool is None:
                job.node_selector = {"pool": rng.choice(("a", "b"))}
        if running:
            job.runtime_minutes = rng.choice((2, 15, 45, 90, 90))
            if rng.random() < 0.1:
                job.running, job.releasing = pods - 1, 1
        self.count += 1
        return job


def generate_contended(seed: int, focus: str) -> Case:
    rng = random.Random(seed)
    action = focus.removeprefix("contended-")
    side_shape = rng.choice(("fraction", "fraction", "cpu"))  # CPU-only pods never beside shared GPUs
    nodes = _Nodes(rng, with_cpu_nodes=side_shape == "cpu")
    queue_docs, leaves = _tree(rng, nodes.gpus)
    documents = priority_classes() + nodes.documents + queue_docs
    max_gpus = max((room.whole_gpus for room in nodes.rooms.values()), default=0)
    jobs = _Jobs(rng, action, side_shape, max_gpus)
    # Running jobs first, most of them in a few queues (over their quota), until the cluster
    # is nearly full; consolidation leaves more free, scattered by the random first fit.
    busy = rng.sample(leaves, rng.randint(1, max(len(leaves) - 1, 1)))
    low, high = {"consolidation": (0.55, 0.85), "allocate": (0.5, 0.9)}.get(action, (0.75, 1.0))
    target = rng.uniform(low, high)
    for _ in range(24):
        if nodes.free_gpus() <= (1 - target) * nodes.gpus:
            break
        home = rng.choice(busy) if rng.random() < 0.8 else rng.choice(leaves)
        preemptible = rng.random() < (0.85 if action in ("consolidation", "preempt") else 0.6)
        job = jobs.draw(home, running=True, preemptible=preemptible, big=False)
        if action in ("consolidation", "preempt") and preemptible:
            job.priority_class = "train"  # below every pending job's priority
        nodes.place(rng, job)
        if job.placed:
            job.min_member = min(job.min_member, job.running) or 1
            documents += [pod_group(job), *pods(job)]
    idle = [q for q in leaves if q not in busy] or leaves
    for _ in range(rng.randint(1, 4) if action != "allocate" else rng.randint(2, 6)):
        if action == "reclaim":
            job = jobs.draw(rng.choice(idle), running=False, preemptible=rng.random() < 0.7)
        elif action == "preempt":  # above the running jobs' priority (train, 50) in their queue
            job = jobs.draw(rng.choice(busy), running=False, preemptible=rng.random() < 0.6)
        elif action == "consolidation":
            job = jobs.draw(rng.choice(leaves), running=False, preemptible=True, big=True)
            _fragmented_fit(rng, job, nodes)
        else:
            job = jobs.draw(rng.choice(leaves), running=False, preemptible=None, big=rng.random() < 0.3)
        documents += [pod_group(job), *pods(job)]
    return Case(seed, focus, documents, _config(rng, action), action)


def _fragmented_fit(rng: random.Random, job: Job, nodes: _Nodes) -> None:
    """Size a pending whole-GPU job to need more GPUs than any node has free but no more than the
    cluster has free in all: it fits only when running pods move."""
    free = [room.whole_gpus for name, room in nodes.rooms.items() if _selects(job, nodes.labels[name])]
    biggest = max((NODE_KINDS[doc["metadata"]["labels"]["node-kind"]][0] for doc in nodes.documents), default=0)
    sizes = [g for g in (2, 4, 8) if max(free, default=0) < g <= min(sum(free), biggest)]
    if job.shape == "whole":
        job.gpus = rng.choice(sizes) if sizes else rng.choice((1, 2))
        job.pods = job.min_member = 1


def _config(rng: random.Random, action: str) -> Doc:
    config: Doc = {"kValue": 0}
    if action != "consolidation" and rng.random() < 0.15:
        config["placementStrategy"] = {"gpu": "spread", "cpu": "binpack"}
    if rng.random() < 0.3:
        config["defaultPreemptMinRuntime"] = rng.choice(("5m", "10m"))
    if rng.random() < 0.3:
        config["defaultReclaimMinRuntime"] = rng.choice(("5m", "10m"))
    return config
