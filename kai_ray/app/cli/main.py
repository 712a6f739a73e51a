"""Entry point: one sub-command per job; bad input ends in one line on stderr, exit 2."""

from __future__ import annotations

import argparse
import gc
import os
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


def main(argv: Sequence[str] | None = None, *, skip_teardown: bool = False) -> int:
    """Run one command. With ``skip_teardown`` (the installed program, never a caller in the same
    process), a command that only reads input and prints an answer runs without the cyclic
    garbage collector and ends the process as soon as its output is flushed (``exit_now``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    one_shot = skip_teardown and getattr(args, "one_shot", False)
    if one_shot:
        # Everything such a command builds lives until the process ends, so a collection finds
        # nothing to free; each one still walks every object made since the last (on 500 nodes
        # and 4,000 jobs, one pass of about 20 ms over what the snapshot became). Its sessions
        # make little cyclic garbage: the reclaim storm's peak memory is the same either way.
        gc.disable()
    try:
        code: int = args.handler(args)
    except InputError as exc:
        print(f"kai-ray: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    if one_shot:
        exit_now(code)
    return code


def exit_now(code: int) -> NoReturn:
    """End the process without freeing what it built. On a large snapshot the model is millions
    of objects, and the interpreter's teardown frees them one by one (0.3-0.5 s of ``kai-ray
    schedule`` on 500 full nodes and 4,000 jobs) after the answer is already printed. A one-shot
    command holds nothing that needs closing: no files open for writing, no child processes."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass  # the reader went away (``| head``): the answer was not wanted
    os._exit(code)


def entry() -> NoReturn:
    """The ``kai-ray`` program."""
    raise SystemExit(main(skip_teardown=True))


if __name__ == "__main__":
    entry()
