"""Every disagreement the KAI oracle found, replayed through kai-ray (no Go needed).

``fixed`` cases: kai-ray now decides every pod exactly as KAI did. ``deliberate`` cases:
kai-ray keeps its own decision (recorded under ``kai_ray``), which README.md's list
"Where kai-ray deliberately differs from KAI" explains; every other pod is still KAI's.
``kai-bug`` cases: likewise, and KAI itself decides as kai-ray once the named fixes to its
own code are on. The oracle tier (``differential.py``) re-runs KAI on the same files, and KAI
with those fixes on the kai-bug ones.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.oracle.cases import case_files, decisions, load_case
from tests.oracle.compare import run_case
from tests.oracle.kai_fixes import FIXES

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.parametrize("path", case_files(), ids=lambda p: p.stem)
def test_kai_ray_decides_as_recorded(path: Path) -> None:
    case, data = load_case(path)
    assert data["verdict"] in ("fixed", "deliberate", "kai-bug"), f"{path.name}: verdict is {data['verdict']!r}"
    expected = dict(data["kai"])
    if data["verdict"] == "fixed":
        assert not data.get("kai_ray"), "a fixed case records no kai-ray decision of its own"
    else:
        assert data.get("kai_ray"), f"a {data['verdict']} case records where kai-ray differs"
        assert set(data["kai_ray"]) <= set(expected)
        expected.update(data["kai_ray"])
    got = decisions(run_case(case))
    differences = {pod: (want, got.get(pod)) for pod, want in expected.items() if got.get(pod) != want}
    assert not differences, f"{data['title']}: pod -> (expected, kai-ray): {differences}"


def test_each_deliberate_case_names_its_readme_entry() -> None:
    readme = README.read_text()
    for path in case_files():
        _, data = load_case(path)
        if data["verdict"] == "deliberate":
            assert data.get("readme") and data["readme"] in readme, (
                f"{path.name}: no README entry {data.get('readme')!r}"
            )


def test_each_kai_bug_case_names_known_fixes() -> None:
    for path in case_files():
        _, data = load_case(path)
        if data["verdict"] == "kai-bug":
            named = str(data.get("fix", "")).split("+")
            assert all(name in FIXES for name in named), f"{path.name}: unknown fix {data.get('fix')!r}"
