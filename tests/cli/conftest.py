"""Running the ``kai-ray`` command in-process and reading what a user would see."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from kai_ray.app.cli.main import main


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str

    @property
    def error_lines(self) -> list[str]:
        return self.err.splitlines()

    def json(self) -> Any:
        return json.loads(self.out)


RunCli = Callable[..., CliResult]


@pytest.fixture
def kai_ray(capsys: pytest.CaptureFixture[str]) -> RunCli:
    """``kai_ray("schedule", "--snapshot", path)`` runs the command like a shell would."""

    def run(*argv: object) -> CliResult:
        capsys.readouterr()  # drop anything printed before
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:  # argparse usage errors
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run
