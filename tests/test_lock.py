"""The lock files: every dependency pyproject.toml names is locked, at a version its range allows,
with hashes, at the same version in both locks; the README's commands and .ci/run install from them."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
RUNTIME = [Requirement(text) for text in PYPROJECT["project"]["dependencies"]]
TEST = [Requirement(text) for text in PYPROJECT["project"]["optional-dependencies"]["test"]]
BUILD = [Requirement(text) for text in PYPROJECT["build-system"]["requires"]]
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)(?:\s*;\s*([^\\]+?))?\s*\\?$")


def locked(name: str) -> dict[str, list[tuple[str, str]]]:
    """package -> [(version, environment marker)], one entry per line that pins it."""
    pins: dict[str, list[tuple[str, str]]] = {}
    lines = (REPO / name).read_text().splitlines()
    for number, line in enumerate(lines):
        match = PIN.match(line)
        if match:
            package, version, marker = match.groups()
            pins.setdefault(canonicalize_name(package), []).append((version, (marker or "").strip()))
            assert "--hash=sha256:" in lines[number + 1], f"{name}: {package} has no hashes"
    return pins


@pytest.mark.parametrize(
    "lock, wanted", [("requirements.lock", RUNTIME + BUILD), ("requirements-test.lock", RUNTIME + TEST + BUILD)]
)
def test_every_dependency_is_locked_within_its_range(lock: str, wanted: list[Requirement]) -> None:
    pins = locked(lock)
    for requirement in wanted:
        versions = pins.get(canonicalize_name(requirement.name))
        assert versions, f"{requirement.name} is not in {lock}: run scripts/refresh-lock"
        for version, _ in versions:
            assert requirement.specifier.contains(version, prereleases=True), (
                f"{lock} pins {requirement.name}=={version}, outside pyproject.toml's {requirement.specifier}: "
                "run scripts/refresh-lock"
            )


def test_both_locks_agree_on_every_version() -> None:
    runtime, test = locked("requirements.lock"), locked("requirements-test.lock")
    assert runtime.keys() <= test.keys()
    assert {name: runtime[name] for name in runtime} == {name: test[name] for name in runtime}


def test_the_readme_and_ci_install_only_from_the_locks() -> None:
    readme = (REPO / "README.md").read_text()
    commands = [line for line in readme.splitlines() if line.startswith("python3 -m venv .venv")]
    assert len(commands) == 3, commands
    for command in commands:
        installs = re.findall(r"pip install ([^&]+?)(?= &&|$)", command)
        assert installs[0] in ("-q -r requirements.lock", "-q -r requirements-test.lock"), command
        assert installs[1:] == ["-q --no-deps --no-build-isolation -e ."], command
    test_command = commands[1]
    assert test_command.endswith(".venv/bin/python -m pytest")
    assert test_command.split(" && ") == (REPO / ".ci" / "run").read_text().split("readme_tests() {\n  ")[1].split(
        "\n"
    )[0].split(" && "), ".ci/run must run the README's test command verbatim"
