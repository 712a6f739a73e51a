"""Build the real cluster's binaries from their Go modules, in two sets.

The control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
(``realcluster/go/kube``, ``realcluster/go/kwok``). KAI: KAI Scheduler's own scheduler, binder,
podgrouper, podgroupcontroller and queuecontroller (``realcluster/go/kai``), with the CRDs and
priority classes of KAI's chart copied from the same module.

The versions are pinned by the harness modules in ``realcluster/go/`` (go.mod + go.sum). Each
set's binaries land in a cache outside the repository, keyed by a hash of its modules' files,
the Go version and the build flags:

    ${KAI_RAY_CACHE:-${XDG_CACHE_HOME:-~/.cache}/kai-ray}/e2e/<key>/bin/   # the control plane
    ${KAI_RAY_CACHE:-${XDG_CACHE_HOME:-~/.cache}/kai-ray}/kai/<key>/bin/   # KAI (and ../deploy/)

so only the first run pays for module download and compilation. Each module is built by one
``go build`` (its binaries share the compile work), with ``-trimpath`` and stripped symbols.

    python -m realcluster.build                 # build if needed, print the binaries' directory
    python -m realcluster.build --kai           # the same for KAI's components
    python -m realcluster.build --workload-api  # the same for the kube-apiserver serving the Workload API
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

GO_DIR = Path(__file__).resolve().parent / "go"
BUILD_FLAGS = ("-trimpath", "-ldflags=-s -w")


class GoMissing(RuntimeError):
    """No usable Go toolchain: the tier cannot build its cluster."""


class BuildFailed(RuntimeError):
    """``go build`` of a harness module failed (module download included)."""


@dataclass(frozen=True, slots=True)
class Target:
    """One binary: the Go package to build and the file name it gets in the cache."""

    module: str  # directory under realcluster/go/
    package: str
    name: str


TARGETS = (
    Target("kube", "k8s.io/kubernetes/cmd/kube-apiserver", "kube-apiserver"),
    Target("kube", "k8s.io/kubernetes/cmd/kube-scheduler", "kube-scheduler"),
    Target("kube", "k8s.io/kubernetes/cmd/kube-controller-manager", "kube-controller-manager"),
    Target("kube", "go.etcd.io/etcd/server/v3", "etcd"),
    Target("kwok", "sigs.k8s.io/kwok/cmd/kwok", "kwok"),
)
KAI_MODULE = "github.com/NVIDIA/KAI-scheduler"
KAI_TARGETS = (
    Target("kai", f"{KAI_MODULE}/cmd/scheduler", "scheduler"),
    Target("kai", f"{KAI_MODULE}/cmd/binder", "binder"),
    Target("kai", f"{KAI_MODULE}/cmd/podgrouper", "podgrouper"),
    Target("kai", f"{KAI_MODULE}/cmd/queuecontroller", "queuecontroller"),
    Target("kai", "./podgroupcontroller", "podgroupcontroller"),  # KAI's main, its metrics address settable
)
# What the build copies from KAI's module next to the binaries (../deploy/<name>/): the chart's
# CRDs and priority classes, plain YAML in v0.12 (no templating in them).
KAI_DEPLOY = {
    "crds": "deployments/kai-scheduler/crds",
    "priorityclasses": "deployments/kai-scheduler/templates/priorityclasses",
}


@dataclass(frozen=True, slots=True)
class BinarySet:
    """Binaries built and cached together: ``${cache}/<name>/<key>/bin``."""

    name: str
    targets: tuple[Target, ...]
    pins: tuple[str, ...]  # the modules whose pinned versions build.json records


CONTROL_PLANE = BinarySet("e2e", TARGETS, ("k8s.io/kubernetes", "go.etcd.io/etcd/server/v3", "sigs.k8s.io/kwok"))
KAI = BinarySet("kai", KAI_TARGETS, (KAI_MODULE, "k8s.io/kubernetes"))
# A kube-apiserver of a release that serves the Kubernetes Workload API (scheduling.k8s.io
# Workload and PodGroup; realcluster/go/kube137), alone: the rest of the control plane stays at
# the main set's release, so the build adds one binary, not a second control plane.
WORKLOAD_API = BinarySet(
    "e2e-workload-api",
    (Target("kube137", "k8s.io/kubernetes/cmd/kube-apiserver", "kube-apiserver"),),
    ("k8s.io/kubernetes",),
)


def _default_name(package: str) -> str:
    """The file name ``go build -o DIR/`` gives a main package (a /vN suffix is skipped)."""
    parts = package.removeprefix("./").split("/")
    last = parts[-1]
    if len(parts) > 1 and last.startswith("v") and last[1:].isdigit():
        return parts[-2]
    return last


def cache_root() -> Path:
    explicit = os.environ.get("KAI_RAY_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kai-ray"


def go_binary() -> str:
    go = shutil.which("go")
    if go is None:
        raise GoMissing(
            "the e2e tier needs a Go toolchain (>= 1.26) on PATH to build etcd, kube-apiserver and kwok; none found"
        )
    return go


def go_version(go: str) -> str:
    done = subprocess.run([go, "env", "GOVERSION", "GOOS", "GOARCH"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise GoMissing(f"`go env` failed: {done.stderr.strip().splitlines()[-1:] or done.returncode}")
    return " ".join(done.stdout.split())


def _modules(binaries: BinarySet) -> list[str]:
    return sorted({t.module for t in binaries.targets})


def cache_key(go_ver: str, binaries: BinarySet = CONTROL_PLANE) -> str:
    """Changes whenever a pinned version, a Go source of a harness module, the toolchain or the
    flags change."""
    digest = hashlib.sha256()
    digest.update(go_ver.encode())
    digest.update(repr(BUILD_FLAGS).encode())
    for target in binaries.targets:
        digest.update(f"{target.module} {target.package} {target.name}\n".encode())
    for module in _modules(binaries):
        for name in ("go.mod", "go.sum"):
            digest.update((GO_DIR / module / name).read_bytes())
        for source in sorted((GO_DIR / module).rglob("*.go")):
            digest.update(f"{source.relative_to(GO_DIR / module)}\n".encode())
            digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def pinned_versions(binaries: BinarySet = CONTROL_PLANE) -> dict[str, str]:
    """module path -> version of the components we build, read from the harness go.mod files."""
    found: dict[str, str] = {}
    for module in _modules(binaries):
        for line in (GO_DIR / module / "go.mod").read_text().splitlines():
            fields = line.replace("require", "").split()
            if len(fields) >= 2 and fields[0] in binaries.pins:
                found[fields[0]] = fields[1]
    return found


def _build_env() -> dict[str, str]:
    env = dict(os.environ)
    # Never fetch a prebuilt toolchain, never edit go.mod/go.sum: the pins are the pins.
    env["GOTOOLCHAIN"] = "local"
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=readonly").strip()
    env.setdefault("CGO_ENABLED", "0")
    return env


def run_go_build(command: list[str], cwd: Path, env: dict[str, str], log: Path, label: str, progress: bool) -> int:
    """Run a ``go build -v`` with its output appended to ``log``; every PROGRESS_SECONDS print one
    line on stderr with the time so far and the packages compiled (none yet: modules are being
    downloaded), so a cold build of many minutes shows it is moving. Returns go's exit code."""
    with log.open("ab") as sink:
        sink.write(f"$ (cd {cwd} && {' '.join(command)})\n".encode())
        sink.flush()
        start = sink.tell()
        began = time.monotonic()
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=sink, stderr=sink)
        while True:
            try:
                return process.wait(timeout=PROGRESS_SECONDS)
            except subprocess.TimeoutExpired:
                if progress:
                    with log.open("rb") as written:
                        written.seek(start)
                        packages = written.read().count(b"\n")
                    doing = f"{packages} packages compiled" if packages else "downloading modules"
                    print(f"{label}: {time.monotonic() - began:.0f} s, {doing}", file=sys.stderr, flush=True)


PROGRESS_SECONDS = 30.0


def _go_build(go: str, binaries: BinarySet, module: str, out: Path, log: Path, progress: bool) -> None:
    targets = [t for t in binaries.targets if t.module == module]
    command = [go, "build", "-v", *BUILD_FLAGS, "-o", f"{out}{os.sep}", *(t.package for t in targets)]
    code = run_go_build(command, GO_DIR / module, _build_env(), log, f"realcluster: go/{module}", progress)
    if code != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:]
        raise BuildFailed(f"go build in realcluster/go/{module} failed (see {log}): {' '.join(tail)}")
    for target in targets:
        built = out / _default_name(target.package)
        if built.name != target.name:
            built.rename(out / target.name)


def build_once(home: Path, done: Path, build: Callable[[], None]) -> None:
    """Run ``build`` (which must create ``done``) unless ``done`` exists. Processes that get here
    together wait on a lock in ``home``; the later ones find the first one's result."""
    if done.exists():
        return
    home.mkdir(parents=True, exist_ok=True)
    with (home / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            build()


def _copy_kai_deploy(go: str, home: Path) -> None:
    """KAI's CRDs and priority classes, from the module the build just used, into ``home/deploy``."""
    done = subprocess.run(
        [go, "list", "-m", "-f", "{{.Dir}}", KAI_MODULE],
        cwd=GO_DIR / "kai",
        env=_build_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    source = Path(done.stdout.strip())
    if done.returncode != 0 or not source.is_dir():
        raise BuildFailed(f"`go list -m {KAI_MODULE}` in realcluster/go/kai failed: {done.stderr.strip()[-300:]}")
    deploy = home / "deploy"
    shutil.rmtree(deploy, ignore_errors=True)
    for name, relative in KAI_DEPLOY.items():
        files = sorted((source / relative).glob("*.yaml"))
        if not files:
            raise BuildFailed(f"{KAI_MODULE} has no {relative}/*.yaml at {source}")
        (deploy / name).mkdir(parents=True)
        for file in files:
            shutil.copyfile(file, deploy / name / file.name)


def ensure_built(progress: bool = True, binaries: BinarySet = CONTROL_PLANE) -> Path:
    """The directory holding the set's binaries, building them first if this version set is new."""
    go = go_binary()
    version = go_version(go)
    home = cache_root() / binaries.name / cache_key(version, binaries)
    bin_dir = home / "bin"
    stamp = home / "build.json"

    def build() -> None:
        if progress:
            names = ", ".join(t.name for t in binaries.targets)
            print(f"realcluster: building {names} into {home} ...", file=sys.stderr)
        started = time.monotonic()
        staging = Path(tempfile.mkdtemp(prefix="bin-", dir=home))
        log = home / "build.log"
        log.write_bytes(b"")
        seconds: dict[str, float] = {}
        for module in _modules(binaries):
            begun = time.monotonic()
            _go_build(go, binaries, module, staging, log, progress)
            seconds[module] = round(time.monotonic() - begun, 1)
        if binaries is KAI:
            _copy_kai_deploy(go, home)
        shutil.rmtree(bin_dir, ignore_errors=True)
        staging.rename(bin_dir)
        record = {
            "versions": pinned_versions(binaries),
            "go": version,
            "seconds": seconds,
            "total_seconds": round(time.monotonic() - started, 1),
        }
        stamp.write_text(json.dumps(record, indent=2) + "\n")
        if progress:
            print(f"realcluster: built in {record['total_seconds']} s {seconds}", file=sys.stderr)

    build_once(home, stamp, build)
    return bin_dir


def built(binaries: BinarySet = CONTROL_PLANE) -> Path | None:
    """The set's binaries' directory if they are in the cache already, else None (no Go on PATH
    included); never builds, so a caller can skip what needs them rather than wait for a build."""
    try:
        version = go_version(go_binary())
    except GoMissing:
        return None
    home = cache_root() / binaries.name / cache_key(version, binaries)
    return home / "bin" if (home / "build.json").exists() else None


def ensure_workload_api_built(progress: bool = True) -> Path:
    """The kube-apiserver (``bin/kube-apiserver``) of the release that serves the Workload API."""
    return ensure_built(progress, WORKLOAD_API)


def ensure_kai_built(progress: bool = True) -> Path:
    """KAI's binaries (``bin/``; the chart's CRDs and priority classes in ``../deploy/``)."""
    return ensure_built(progress, KAI)


def build_record(bin_dir: Path) -> dict[str, object]:
    """What ``ensure_built`` wrote about the build of ``bin_dir`` (versions, seconds)."""
    loaded: dict[str, object] = json.loads((bin_dir.parent / "build.json").read_text())
    return loaded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m realcluster.build", description=__doc__.split("\n")[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--kai", action="store_true", help="build KAI's components instead of the control plane")
    which.add_argument(
        "--workload-api", action="store_true", help="build the kube-apiserver that serves the Workload API"
    )
    args = parser.parse_args(argv)
    try:
        bin_dir = ensure_built(binaries=KAI if args.kai else WORKLOAD_API if args.workload_api else CONTROL_PLANE)
    except (GoMissing, BuildFailed) as error:
        print(f"realcluster: {error}", file=sys.stderr)
        return 1
    print(bin_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
