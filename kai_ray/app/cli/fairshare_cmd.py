"""``kai-ray fairshare FILE``: the resource division alone, like KAI's fair-share simulator."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("fairshare", help="divide resources between queues (no nodes or pods)")
    parser.add_argument("file", help="fair-share input YAML/JSON (format: docs/architecture.md#fair-share-input)")
    parser.add_argument("-o", "--output", choices=("json", "text"), default="json")
    parser.set_defaults(handler=run, one_shot=True)


def run(args: argparse.Namespace) -> int:
    from kai_ray.app.cli.fairshare_view import divide_problem, division_json, division_text
    from kai_ray.app.cli.output import print_json
    from kai_ray.io.fairshare_input import load_fairshare_problem

    problem = load_fairshare_problem(args.file)
    tree, division, request = divide_problem(problem)
    if args.output == "json":
        print_json(division_json(problem, tree, division))
    else:
        print(division_text(tree, division, request))
    return 0
