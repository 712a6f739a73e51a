"""The image: a multi-stage, non-root Dockerfile whose build context holds what `pip install .`
needs and nothing of the developer's machine. No container engine runs in CI, so the context is
computed as the Docker client would compute it, and the package is built from exactly that
context; where an engine exists, the last test builds and runs the image itself."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.deploy.build_context import context_files, copy_sources, excluded, read_rules, stages

DOCKERFILE = REPO / "Dockerfile"
RUNTIME_PACKAGES = ("kai_ray", "pod_grouper", "placement", "shards", "coordinator", "k8s_adapter", "devcluster")


def tracked(*prefixes: str) -> set[str]:
    out = subprocess.run(["git", "ls-files", *prefixes], cwd=REPO, capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.fixture(scope="module")
def context() -> set[str]:
    return context_files(REPO, read_rules(REPO / ".dockerignore"))


def test_the_context_holds_the_project_the_packages_and_the_crds(context: set[str]) -> None:
    wanted = {"requirements.lock", "pyproject.toml", "README.md"} | tracked(*RUNTIME_PACKAGES, "helm/kai-ray/crds")
    assert wanted - context == set()


def test_the_context_holds_nothing_else(context: set[str]) -> None:
    allowed_roots = {
        "requirements.lock",
        "pyproject.toml",
        "README.md",
        "Dockerfile",
        ".dockerignore",
        *RUNTIME_PACKAGES,
        "helm",
    }
    assert {path.split("/")[0] for path in context} <= allowed_roots
    junk = [p for p in context if "__pycache__" in p or p.endswith((".pyc", ".kubeconfig")) or ".egg-info" in p]
    assert junk == []
    assert {p for p in context if p.startswith("helm/")} == tracked("helm/kai-ray/crds")
    size = sum((REPO / p).stat().st_size for p in context)
    assert size < 3_000_000, f"the build context is {size} bytes"


@pytest.mark.parametrize(
    "path",
    [
        ".venv/lib/python3.11/site-packages/numpy/__init__.py",
        ".git/HEAD",
        ".git",  # a worktree's .git is a file
        "tests/helm/rbac.py",
        ".pytest_cache/v/cache/nodeids",
        ".mypy_cache/3.11/kai_ray/cli.data.json",
        "kai_ray/.mypy_cache/x.json",
        ".hypothesis/examples/ab/cd",
        ".ruff_cache/0.5/123",
        "kai_ray/__pycache__/errors.cpython-311.pyc",
        "coordinator/actions/__pycache__/allocate.cpython-311.pyc",
        "kai_ray.egg-info/PKG-INFO",
        "kai-ray-dev.kubeconfig",
        "devcluster/kai-ray-dev.kubeconfig",
        "conformance-out/report.json",
        "out/report.png",
        "loadtests/suite.py",
        "docs/metrics.md",
        "helm/kai-ray/values.yaml",
        "helm/kai-ray/templates/deployment.yaml",
    ],
)
def test_local_state_and_what_the_image_does_not_run_stay_out(path: str) -> None:
    assert excluded(path, read_rules(REPO / ".dockerignore"))


def test_every_file_the_dockerfile_copies_is_in_the_context(context: set[str]) -> None:
    for source in copy_sources(DOCKERFILE):
        source = source.rstrip("/")
        assert source in context or any(p.startswith(source + "/") for p in context), source


def test_the_dockerfile_builds_in_one_stage_and_runs_a_non_root_user_in_a_slim_one() -> None:
    build, final = stages(DOCKERFILE)
    installs = [line for line in build if "pip install " in line]
    assert installs[0].endswith("pip install -r requirements.lock")  # the locked set, hashes checked
    assert installs[1:] == ["RUN /opt/kai-ray/bin/pip install --no-deps --no-build-isolation ."]  # nothing unlocked
    assert not any("pip install" in line for line in final)  # no compiler or pip cache in the image
    assert any(line.startswith("COPY --from=build /opt/kai-ray /opt/kai-ray") for line in final)
    [user] = [line.split()[1] for line in final if line.startswith("USER ")]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0 and gid.isdigit() and int(gid) != 0  # runAsNonRoot can check a number
    assert not any(line.startswith(("COPY . ", "ADD . ")) for stage in (build, final) for line in stage)
    base = [line for line in DOCKERFILE.read_text().splitlines() if line.startswith("ARG PYTHON_IMAGE=")]
    assert base and "slim" in base[0] and ":latest" not in base[0]


def test_the_package_builds_from_the_context_alone(context: set[str], tmp_path: Path) -> None:
    """`pip install .` in the image sees only the context: the project's build backend, run on a copy
    of it, must find every module of the repository's runtime packages and the command's entry point."""
    source = tmp_path / "context"
    for path in context:
        target = source / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / path, target)
    build = "import sys, setuptools.build_meta as backend; print(backend.build_sdist(sys.argv[1]))"
    result = subprocess.run(
        [sys.executable, "-c", build, str(tmp_path)], cwd=source, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    archive = tmp_path / result.stdout.split()[-1]
    with tarfile.open(archive) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
        metadata = next(m for m in sdist.getmembers() if m.name.endswith("entry_points.txt"))
        entry_points = (sdist.extractfile(metadata) or io.BytesIO()).read().decode()
    modules = {p for p in tracked(*RUNTIME_PACKAGES) if p.endswith((".py", ".yaml", ".md", "py.typed"))}
    assert modules - names == set()
    assert "kai-ray = kai_ray.app.cli.main:entry" in entry_points
