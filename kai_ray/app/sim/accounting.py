"""Node usage counted twice: from the pods that hold nodes, and as the scheduler's shards hold it.

The simulator (and the live incremental-vs-from-scratch test) recounts every node's usage from
the pods alone, independently of the scheduler, and compares it with the shards' rows: a pod
that finished but still holds its GPUs there, a node whose pods were forgotten, a hold counted
twice, all show as a difference naming the node, the resource and both figures.

What holds a node: a pod bound to it that is running or terminating (or binding). CPU, memory,
whole GPUs and the pod slot add up; fractions count as the shared GPUs they sit on. Both sides
are arrays over the nodes, so the check costs numpy operations rather than a pass per node.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kai_ray.model import Pod, PodState
from placement.holdings import Kind
from placement.rows import NodeHolds
from placement.shapes import CPU, GPU, MEMORY, PODS

TOLERANCE = 1e-6
HOLDING = (PodState.RUNNING, PodState.RELEASING, PodState.BINDING)
COLUMNS = (CPU, MEMORY, GPU, PODS)
LABELS = ("cpu", "memory", "whole GPUs", "pods")


@dataclass(frozen=True, slots=True)
class Usage:
    names: list[str]
    amounts: npt.NDArray[np.float64]  # (nodes, 4): cpu, memory, whole GPUs, pods
    shared: dict[str, set[str]]  # node -> shared GPUs with a fraction on them (nodes with none left out)


def from_pods(pods: Iterable[Pod], nodes: Iterable[str]) -> Usage:
    """What the pods that hold ``nodes`` add up to (pods on other nodes are not counted)."""
    names = list(nodes)
    index = {name: i for i, name in enumerate(names)}
    amounts = np.zeros((len(names), len(COLUMNS)))
    shared: dict[str, set[str]] = {}
    for pod in pods:
        row = index.get(pod.node or "")
        if row is None or pod.state not in HOLDING:
            continue
        amounts[row] += (pod.requests.cpu, pod.requests.memory, pod.requests.gpu, 1.0)
        if pod.gpu_share is not None and pod.gpu_groups:
            shared.setdefault(pod.node or "", set()).update(pod.gpu_groups)
    return Usage(names, amounts, shared)


def from_holds(parts: Sequence[NodeHolds]) -> Usage:
    """What the scheduler holds per node: its shards' active and releasing holds."""
    names = [name for holds in parts for name in holds.names]
    blocks = [(holds.held[Kind.ACTIVE] + holds.held[Kind.RELEASING])[:, COLUMNS] for holds in parts]
    amounts = np.concatenate(blocks) if blocks else np.zeros((0, len(COLUMNS)))
    shared: dict[str, set[str]] = {}
    for holds in parts:
        for row, groups in holds.groups.items():
            held = {g for g, (active, releasing, _, _) in groups.items() if active + releasing > 0}
            if held:
                shared[holds.names[row]] = held
    return Usage(names, amounts, shared)


def differences(scheduler: Usage, counted: Usage, limit: int = 10) -> list[str]:
    """Where the scheduler's usage differs from the recount, node by node (empty: they agree)."""
    out: list[str] = []
    mine = {name: i for i, name in enumerate(scheduler.names)}
    theirs = {name: i for i, name in enumerate(counted.names)}
    for name in sorted(set(mine) ^ set(theirs)):
        where = "the recount" if name in mine else "the scheduler's shards"
        out.append(f"{name}: missing from {where}")
    common = [name for name in scheduler.names if name in theirs]
    if common:
        a = scheduler.amounts[[mine[n] for n in common]]
        b = counted.amounts[[theirs[n] for n in common]]
        wrong = np.abs(a - b) > TOLERANCE * np.maximum(1.0, np.abs(a))
        for row, column in zip(*np.nonzero(wrong), strict=True):
            out.append(
                f"{common[row]}: the scheduler holds {a[row, column]:g} {LABELS[column]}, "
                f"the pods on it hold {b[row, column]:g}"
            )
    for name in sorted(set(scheduler.shared) | set(counted.shared)):
        held, used = scheduler.shared.get(name, set()), counted.shared.get(name, set())
        if held != used:
            out.append(f"{name}: the scheduler holds shared GPUs {sorted(held)}, the pods on it use {sorted(used)}")
    return out[:limit]
