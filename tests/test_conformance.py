"""KAI conformance: runs the shared checker when the scenarios are present beside the repository."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import CONFORMANCE, REPO


@pytest.mark.skipif(not (CONFORMANCE / "check.py").exists(), reason="../shared/conformance is not checked out")
def test_every_kai_scenario_passes() -> None:
    result = subprocess.run(
        [sys.executable, str(CONFORMANCE / "check.py"), "--cmd", f"{sys.executable} -m kai_ray", "-j", "2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1].endswith(" 0 failed")
