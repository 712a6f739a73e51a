"""Hypothesis strategies for small random clusters: nodes, a queue tree, gangs, some already running.

The generated snapshot is always a state a real cluster could be in: pods that run or
are terminating were placed by a first-fit packer that respects every node's capacity
(shared GPUs included), so any over-commit found after a session is the scheduler's doing.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import TypeVar

from hypothesis import strategies as st

from kai_ray.model import ClusterSnapshot, Node, Pod, PodState, Queue, QueueResource, ResourceVector
from tests.builders import GIB, JobSpec, build, node

NOW = 1_000_000.0
UNLIMITED = -1.0
GPU_MEMORY_MIB = (40_960, 81_920)
T = TypeVar("T")


@dataclass
class _NodeRoom:
    """What the packer has left on one node while it places the snapshot's running pods."""

    cpu: float
    memory: float
    whole_gpus: int
    pods: int
    shared: dict[str, float] = field(default_factory=dict)  # gpu group -> portion used

    def take(self, cpu: float, memory: float, gpus: float, fraction: float | None, name: str) -> str | None:
        """Take room for one pod; the shared GPU it sits on ('' for none), or None if it does not fit."""
        if cpu > self.cpu or memory > self.memory or self.pods < 1:
            return None
        group = ""
        if fraction is not None:
            group = next((g for g, used in sorted(self.shared.items()) if used + fraction <= 1.0), "")
            if not group:
                if self.whole_gpus < 1 or self.pods < 2:  # a new shared GPU also needs its reservation pod
                    return None
                group = f"{name}-shared{len(self.shared)}"
                self.shared[group] = 0.0
                self.whole_gpus -= 1
                self.pods -= 1
            self.shared[group] += fraction
        elif gpus > self.whole_gpus:
            return None
        else:
            self.whole_gpus -= int(gpus)
        self.cpu -= cpu
        self.memory -= memory
        self.pods -= 1
        return group


@st.composite
def nodes(draw: st.DrawFn) -> list[Node]:
    count = draw(st.integers(0, 8))  # none: a cluster before its first node joins
    out = []
    for i in range(count):
        out.append(
            node(
                f"n{i}",
                gpu=draw(st.sampled_from((8, 8, 4, 2, 0))),
                cpu=draw(st.sampled_from((16_000, 64_000))),
                memory=draw(st.sampled_from((64 * GIB, 512 * GIB))),
                pods=draw(st.sampled_from((110, 110, 6))),
                gpu_memory=draw(st.sampled_from(GPU_MEMORY_MIB)),
            )
        )
    return out


def _resource(draw: st.DrawFn, quotas: tuple[float, ...], limits: tuple[float, ...]) -> QueueResource:
    return QueueResource(
        draw(st.sampled_from(quotas)), draw(st.sampled_from((1.0, 1.0, 2.0, 0.0))), draw(st.sampled_from(limits))
    )


@st.composite
def queue_trees(draw: st.DrawFn) -> tuple[list[Queue], list[str]]:
    """1-6 queues, flat or with 1-2 parents above the leaves; returns the queues and the leaf names."""
    parents = draw(st.integers(0, 2))
    leaves = draw(st.integers(1, 6 - parents))
    queues = []
    for i in range(parents):
        queues.append(
            Queue(
                f"dept{i}",
                None,
                draw(st.sampled_from((100, 100, 200))),
                gpu=_resource(draw, (UNLIMITED, 0, 4, 8, 16), (UNLIMITED, UNLIMITED, 6, 12)),
                cpu=_resource(draw, (UNLIMITED, 32_000), (UNLIMITED, UNLIMITED, 48_000)),
                memory=QueueResource(UNLIMITED, 1.0, UNLIMITED),
                created=float(draw(st.integers(0, 3))),
            )
        )
    names = []
    for i in range(leaves):
        parent = f"dept{draw(st.integers(0, parents - 1))}" if parents else None
        names.append(f"q{i}")
        queues.append(
            Queue(
                f"q{i}",
                parent,
                draw(st.sampled_from((100, 100, 50, 200))),
                gpu=_resource(draw, (0, 1, 2, 4, 8), (UNLIMITED, UNLIMITED, 2, 4, 8)),
                cpu=_resource(draw, (UNLIMITED, 8_000, 16_000), (UNLIMITED, UNLIMITED, 24_000)),
                memory=_resource(draw, (UNLIMITED, 64 * GIB), (UNLIMITED, UNLIMITED, 128 * GIB)),
                created=float(draw(st.integers(0, 3))),
            )
        )
    return queues, names


@st.composite
def job_specs(draw: st.DrawFn, index: int, leaves: list[str]) -> tuple[JobSpec, int, int]:
    """One job, and how many of its pods should already run and be terminating."""
    pods = draw(st.integers(1, 4))
    kind = draw(st.sampled_from(("whole", "whole", "whole", "fraction", "cpu")))
    fraction = draw(st.sampled_from((0.5, 0.25))) if kind == "fraction" else None
    priority = draw(st.sampled_from((50, 75, 100, 125)))
    # From the priority (thrice as often), preemptible, non-preemptible, semi-preemptible.
    mode = draw(st.sampled_from(("priority", "priority", "priority", "preemptible", "non-preemptible", "semi")))
    sub_groups: list[tuple[str, int]] = []
    if pods >= 2 and draw(st.integers(0, 4)) == 0:
        firsts, seconds = (pods + 1) // 2, pods // 2  # pods are dealt round-robin to the two sub-groups
        sub_groups = [("a", draw(st.integers(1, firsts))), ("b", draw(st.integers(0, seconds)))]
        min_member = sum(m for _, m in sub_groups)
    else:
        min_member = draw(st.integers(1, pods))
    spec = JobSpec(
        f"j{index}",
        draw(st.sampled_from(leaves)),
        pods=pods,
        gpu=0 if kind == "cpu" else draw(st.integers(1, 4)),
        fraction=fraction,
        cpu=draw(st.sampled_from((500, 2_000, 8_000))),
        memory=draw(st.sampled_from((GIB, 8 * GIB, 32 * GIB))),
        priority=priority,
        preemptible={"preemptible": True, "non-preemptible": False}.get(mode),
        semi_preemptible=mode == "semi",
        min_member=min_member,
        created=float(index),
        sub_groups=sub_groups,
        stale_since=draw(st.sampled_from((None, None, NOW - 600))),
    )
    running = draw(st.sampled_from((0, 0, pods, pods, min_member, max(min_member - 1, 0))))
    releasing = draw(st.sampled_from((0, 0, 0, 1))) if running < pods else 0
    return spec, running, min(releasing, pods - running)


def _place_running(draw: st.DrawFn, spec: JobSpec, running: int, releasing: int, rooms: dict[str, _NodeRoom]) -> None:
    """First fit over a random node order; pods that do not fit stay pending."""
    order = draw(st.permutations(sorted(rooms)))
    placed: list[tuple[str, str]] = []
    for _ in range(running + releasing):
        for name in order:
            group = rooms[name].take(spec.cpu, spec.memory, 0 if spec.fraction else spec.gpu, spec.fraction, name)
            if group is not None:
                placed.append((name, group))
                break
    # The first placed pods run, the rest are terminating (what fits is kept, in that order).
    spec.running_on = [n for n, _ in placed[:running]]
    spec.releasing_on = [n for n, _ in placed[running:]]
    spec.gpu_groups = [g for _, g in placed]


@st.composite
def clusters(draw: st.DrawFn, max_jobs: int = 12) -> ClusterSnapshot:
    """A random cluster: 0-8 nodes, a 1-6 queue tree, 1-``max_jobs`` jobs, some of them running."""
    node_list = draw(nodes())
    queues, leaves = draw(queue_trees())
    rooms = {
        n.name: _NodeRoom(n.allocatable.cpu, n.allocatable.memory, int(n.allocatable.gpu), int(n.allocatable.pods))
        for n in node_list
    }
    foreign = _foreign_pods(draw, rooms)
    specs = []
    for i in range(draw(st.integers(1, max_jobs))):
        spec, running, releasing = draw(job_specs(i, leaves))
        if running or releasing:
            _place_running(draw, spec, running, releasing, rooms)
        specs.append(spec)
    snapshot = build(node_list, queues, specs)
    return replace(snapshot, pods=snapshot.pods + tuple(foreign))


def _foreign_pods(draw: st.DrawFn, rooms: dict[str, _NodeRoom]) -> list[Pod]:
    """Sometimes a pod of another scheduler already runs: it takes capacity but belongs to no queue."""
    out = []
    for i in range(draw(st.sampled_from((0, 0, 0, 1))) if rooms else 0):
        name = draw(st.sampled_from(sorted(rooms)))
        gpus = min(rooms[name].whole_gpus, 1)
        if rooms[name].take(4_000, 8 * GIB, gpus, None, name) is None:
            continue
        out.append(
            Pod(
                "kube-system",
                f"other-{i}",
                uid=f"uid-other-{i}",
                scheduler_name="default-scheduler",
                state=PodState.RUNNING,
                node=name,
                requests=ResourceVector.of(cpu=4_000, memory=8 * GIB, gpu=gpus, pods=1),
            )
        )
    return out


def shuffled(snapshot: ClusterSnapshot, rng: random.Random) -> ClusterSnapshot:
    """The same cluster with every list of objects in another order."""

    def reorder(items: tuple[T, ...]) -> tuple[T, ...]:
        return tuple(rng.sample(items, len(items)))

    return replace(
        snapshot,
        nodes=reorder(snapshot.nodes),
        pods=reorder(snapshot.pods),
        pod_groups=reorder(snapshot.pod_groups),
        queues=reorder(snapshot.queues),
    )
