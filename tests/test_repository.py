"""The repository as a whole: it stands on its own, and the linters pass on it.

The linters run here, inside the README's test command, so that a change that breaks
formatting, lint or typing fails the same run CI makes (``.ci/run``). Their settings are
pyproject.toml's: ruff's rules and line length, mypy strict on every package.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

# Where the project started, beside the repository; a clone does not have it.
OUTSIDE = ".." + "/shared"
SKIPPED_DIRS = {".git", ".venv", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis"}


def tracked_files() -> list[Path]:
    """Files under version control; every file but build and cache folders when git is absent."""
    if shutil.which("git") and (REPO / ".git").exists():
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60
        ).stdout.decode()
        return [REPO / name for name in listed.split("\0") if name]
    return [
        path
        for path in REPO.rglob("*")
        if path.is_file()
        and not SKIPPED_DIRS & set(path.relative_to(REPO).parts)
        and not any(part.endswith(".egg-info") for part in path.parts)
    ]


def test_no_file_refers_to_a_path_outside_the_repository() -> None:
    files = tracked_files()
    assert len(files) > 100 and REPO / "README.md" in files
    found = []
    for path in files:
        if not path.is_file():  # deleted but not yet committed
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE in line:
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert found == [], "\n".join(found)


def _run(*argv: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_ruff_format_leaves_every_file_as_it_is() -> None:
    result = _run("ruff", "format", "--check", "--no-cache", ".", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_check_finds_nothing() -> None:
    result = _run("ruff", "check", "--no-cache", ".", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.timeout(600)
def test_mypy_strict_finds_nothing() -> None:
    # The packages and strictness come from pyproject.toml ([tool.mypy]); the cache makes reruns quick.
    result = _run("mypy", timeout=600)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert result.stdout.startswith("Success:"), result.stdout


def _anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_link_to_the_architecture_document_lands_on_a_section() -> None:
    document = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    anchors = {_anchor(line.lstrip("#")) for line in document.splitlines() if line.startswith("#")}
    assert {"cli", "snapshot-input", "decision-output", "scheduler-config", "fair-share-input"} <= anchors
    missing = []
    for path in tracked_files():
        if path.suffix not in (".py", ".md", ".yaml", ".tpl") or not path.is_file():
            continue
        for anchor in re.findall(r"architecture\.md#([\w-]+)", path.read_text(encoding="utf-8")):
            if anchor not in anchors:
                missing.append(f"{path.relative_to(REPO)}: #{anchor}")
    assert missing == [], "\n".join(missing)


def test_relative_links_in_markdown_files_point_at_files_that_exist() -> None:
    broken = []
    for path in tracked_files():
        if path.suffix != ".md" or not path.is_file():
            continue
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            resolved = (path.parent / target).resolve()
            if not resolved.exists() or not resolved.is_relative_to(REPO):
                broken.append(f"{path.relative_to(REPO)}: {target}")
    assert broken == [], "\n".join(broken)
