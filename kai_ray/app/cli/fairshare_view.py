"""What ``kai-ray fairshare`` computes and prints: the division of one fair-share input.

Apart from the command's parser, so that every other command starts without the queue tree's
numpy code (the command line imports each command's parser at start).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coordinator.fairshare import RESOURCES, Division, QueueTree, divide
from kai_ray.app.cli.output import clean_number, format_table, human_quantity
from kai_ray.io.fairshare_input import FairShareProblem
from kai_ray.model.fairshare import Array


def divide_problem(problem: FairShareProblem) -> tuple[QueueTree, Division, Array]:
    """The division ``fairshare`` prints: the queue tree, its division and each queue's request."""
    tree = QueueTree.build(problem.specs)
    request = np.array([problem.request[name] for name in tree.names]).reshape(len(tree), 3)
    usage = np.array([problem.usage[name] for name in tree.names]).reshape(len(tree), 3)
    return tree, divide(tree, problem.total, request, usage, problem.k_value), request


def division_json(problem: FairShareProblem, tree: QueueTree, division: Division) -> dict[str, Any]:
    """``fairshare -o json``: each queue's fair share (queues in input order) and what the top level left."""
    order = {spec.name: i for i, spec in enumerate(problem.specs)}
    return {
        "queues": {
            name: {
                "fairShare": {
                    r: clean_number(division.fair_share[tree.index[name], j]) for j, r in enumerate(RESOURCES)
                }
            }
            for name in sorted(tree.names, key=order.__getitem__)
        },
        "remaining": {r: clean_number(division.remaining[j]) for j, r in enumerate(RESOURCES)},
    }


def division_text(tree: QueueTree, division: Division, request: Array) -> str:
    """``fairshare -o text``: the queue tree with each queue's fair share and request."""
    rows = []
    for i in _depth_first(tree):
        name = tree.names[i]
        indent = "  " * int(tree.depth[i])
        rows.append(
            [
                indent + name,
                *(human_quantity(r, division.fair_share[i, j]) for j, r in enumerate(RESOURCES)),
                *(human_quantity(r, request[i, j]) for j, r in enumerate(RESOURCES)),
            ]
        )
    table = format_table(["queue", "gpu", "cpu", "memory", "req gpu", "req cpu", "req memory"], rows)
    left = ", ".join(f"{r} {human_quantity(r, division.remaining[j])}" for j, r in enumerate(RESOURCES))
    return f"{table}\n\nundistributed at the top level: {left}"


def _depth_first(tree: QueueTree) -> list[int]:
    """Every queue right under its parent, so that the indentation reads as the tree
    (the tree itself is stored level by level)."""
    order: list[int] = []
    stack = [i for i in reversed(range(len(tree))) if tree.parent[i] < 0]
    while stack:
        i = stack.pop()
        order.append(i)
        stack.extend(reversed(tree.children[i]))
    return order
