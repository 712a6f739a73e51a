"""Without Go the e2e tier fails at once with one line; the default run never needs Go."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _path_without_go() -> str:
    return os.pathsep.join(
        d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "go").exists()
    )


def test_the_e2e_tier_fails_with_one_line_when_go_is_missing() -> None:
    env = {**os.environ, "PATH": _path_without_go()}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--e2e", "tests/e2e", "-q", "-p", "no:randomly"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert lines == [
        "ERROR: the e2e tier needs a Go toolchain (>= 1.26) on PATH to build etcd, kube-apiserver and kwok; none found"
    ]


def test_the_load_test_says_so_in_one_line_too() -> None:
    env = {**os.environ, "PATH": _path_without_go()}
    done = subprocess.run(
        [sys.executable, "-m", "loadtests.kwok_load", "--quick"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1
    assert "needs a Go toolchain" in done.stderr


def test_without_the_flag_only_the_dev_cluster_variants_run() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/e2e", "--collect-only", "-p", "no:randomly"],
        cwd=REPO,
        env={**os.environ, "PATH": _path_without_go()},
        capture_output=True,
        text=True,
        timeout=120,
    )
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    assert ids and all("[dev]" in i for i in ids), done.stdout
    assert "deselected" in done.stdout
