"""Entry point: one sub-command per job; bad input ends in one line on stderr, exit 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from kai_ray.app.cli import crds_cmd, devcluster_cmd, fairshare_cmd, run_cmd, schedule_cmd, simulate_cmd
from kai_ray.errors import InputError

EXIT_BAD_INPUT = 2


class OneLineParser(argparse.ArgumentParser):
    """A usage error is one line on stderr and exit 2, like every other user error (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = OneLineParser(
        prog="kai-ray",
        description="KAI Scheduler's semantics on Ray actors: schedule, simulate, run.",
    )
    # Sub-command parsers are OneLineParsers too (argparse makes them of the parent's class).
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    simulate_cmd.add_parser(subparsers)
    fairshare_cmd.add_parser(subparsers)
    schedule_cmd.add_parser(subparsers)
    run_cmd.add_parser(subparsers)
    devcluster_cmd.add_parsers(subparsers)
    crds_cmd.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except InputError as exc:
        print(f"kai-ray: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    return code


if __name__ == "__main__":
    raise SystemExit(main())
