"""``schedule`` and ``fairshare`` run in one process and must not pay for importing Ray or the
serving machinery (docs/architecture.md#cli), nor for freeing the model after the answer."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

HEAVY = ("ray", "kubernetes_asyncio", "aiohttp", "matplotlib", "asyncio")

PROBE = """
import contextlib, io, sys
from kai_ray.app.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    codes = [main(["schedule", "--snapshot", "examples/cluster.yaml", "--now", "2026-01-03T00:00:00Z"]),
             main(["schedule", "--snapshot", "examples/cluster.yaml", "--actions", "none", "-o", "text"]),
             main(["fairshare", "examples/fairshare.yaml", "-o", "text"])]
heavy = sorted({name.split(".")[0] for name in sys.modules} & set(sys.argv[1:]))
print(codes, heavy)
"""


def test_schedule_and_fairshare_never_import_ray_or_the_kubernetes_client() -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *HEAVY], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[0, 0, 0] []"


def test_the_program_prints_every_decision_before_it_ends_without_teardown() -> None:
    """The installed program ends a ``schedule`` as soon as its output is flushed: the whole
    answer arrives through a pipe, and the exit codes are the command's."""
    command = [sys.executable, "-m", "kai_ray", "schedule", "--snapshot", "examples/cluster.yaml"]
    done = subprocess.run(
        [*command, "--now", "2026-01-03T00:00:00Z"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    in_process = subprocess.run(
        [sys.executable, "-c", PROBE_JSON], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert in_process.returncode == 0, in_process.stderr
    assert json.loads(done.stdout) == json.loads(in_process.stdout)
    refused = subprocess.run([*command, "--actions", "nothing"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2
    assert refused.stdout == ""


PROBE_JSON = """
from kai_ray.app.cli.main import main
raise SystemExit(main(["schedule", "--snapshot", "examples/cluster.yaml", "--now", "2026-01-03T00:00:00Z"]))
"""
