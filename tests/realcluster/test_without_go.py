"""Without Go the tiers that need it skip with the reason, or under CI fail at once with one line;
the default run never needs Go. Under CI a Go build that fails (KAI's components here) stops the
tier with the reason too, before any test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from realcluster import build

REPO = Path(__file__).resolve().parents[2]


def _path_without_go() -> str:
    return os.pathsep.join(
        d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "go").exists()
    )


def _pytest_without_go(*args: str, ci: bool) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    env["PATH"] = _path_without_go()
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args, "-q", "-rs", "-p", "no:randomly"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "tier, expected",
    [
        (("--e2e", "tests/e2e"), "needs a Go toolchain (>= 1.26) on PATH to build etcd, kube-apiserver and kwok"),
        (("tests/oracle/differential.py",), "oracle tier: the KAI oracle needs a Go toolchain"),
    ],
)
def test_under_ci_a_tier_without_go_fails_with_one_line(tier: tuple[str, ...], expected: str) -> None:
    done = _pytest_without_go(*tier, ci=True)
    assert done.returncode != 0
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ERROR: ") and expected in lines[0], lines


@pytest.mark.parametrize(
    "tier, reason",
    [
        (("--e2e", "tests/e2e"), "no Go toolchain on PATH to build the real control plane"),
        (("tests/oracle/differential.py",), "no Go toolchain on PATH to build the KAI oracle"),
    ],
)
def test_run_alone_without_go_the_tests_that_need_it_skip_with_the_reason(tier: tuple[str, ...], reason: str) -> None:
    done = _pytest_without_go(*tier, ci=False)
    assert done.returncode == 0, done.stdout[-2000:]
    skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skipped and all(reason in line for line in skipped), done.stdout[-2000:]
    assert " failed" not in done.stdout and " error" not in done.stdout


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


@pytest.mark.skipif(shutil.which("go") is None, reason="needs Go: the KAI build must be tried, and fail")
def test_under_ci_kais_components_that_cannot_be_built_stop_the_tier_with_the_reason(tmp_path: Path) -> None:
    """The control plane found in the cache (a stand-in: its build stamp is all the lookup reads),
    KAI's binaries missing, and the module cache empty and unreachable: the tier stops at once."""
    version = build.go_version(build.go_binary())
    control_plane = tmp_path / "cache" / "e2e" / build.cache_key(version)
    (control_plane / "bin").mkdir(parents=True)
    (control_plane / "build.json").write_text(json.dumps({"versions": {}}))
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    env.update(CI="true", KAI_RAY_CACHE=str(tmp_path / "cache"), GOPROXY="off", GOMODCACHE=str(tmp_path / "mod"))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--e2e", "tests/e2e/test_kai_deployed.py", "-q", "-p", "no:randomly"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    # The build's progress line, then the failure: the end of go's output, no test run or skipped.
    assert lines[-1].startswith("ERROR: KAI's components: go build in realcluster/go/kai failed"), lines
    assert "module lookup disabled by GOPROXY=off" in lines[-1]
    assert not [line for line in lines if "passed" in line or "skipped" in line], lines
    assert not (tmp_path / "cache" / "kai" / build.cache_key(version, build.KAI) / "bin").exists()
