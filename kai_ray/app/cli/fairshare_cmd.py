"""``kai-ray fairshare FILE``: the resource division alone, like KAI's fair-share simulator."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from coordinator.fairshare import RESOURCES, Division, QueueTree, divide
from kai_ray.app.cli.output import clean_number, format_table, human_quantity, print_json
from kai_ray.io.fairshare_input import FairShareProblem, load_fairshare_problem
from kai_ray.model.fairshare import Array


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("fairshare", help="divide resources between queues (no nodes or pods)")
    parser.add_argument("file", help="fair-share input YAML/JSON (format: docs/architecture.md#fair-share-input)")
    parser.add_argument("-o", "--output", choices=("json", "text"), default="json")
    parser.set_defaults(handler=run)


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


def run(args: argparse.Namespace) -> int:
    problem = load_fairshare_problem(args.file)
    tree, division, request = divide_problem(problem)
    if args.output == "json":
        print_json(division_json(problem, tree, division))
        return 0
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
    print(format_table(["queue", "gpu", "cpu", "memory", "req gpu", "req cpu", "req memory"], rows))
    left = ", ".join(f"{r} {human_quantity(r, division.remaining[j])}" for j, r in enumerate(RESOURCES))
    print(f"\nundistributed at the top level: {left}")
    return 0


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
