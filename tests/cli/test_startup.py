"""``schedule`` and ``fairshare`` run in one process and must not pay for importing Ray (docs/architecture.md#cli)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

HEAVY = ("ray", "kubernetes_asyncio", "aiohttp", "matplotlib")

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
