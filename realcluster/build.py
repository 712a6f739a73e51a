"""Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok from their Go modules.

The versions are pinned by the harness modules in ``realcluster/go/`` (go.mod + go.sum). The
binaries land in a cache outside the repository, keyed by a hash of those files, the Go version
and the build flags:

    ${KAI_RAY_CACHE:-${XDG_CACHE_HOME:-~/.cache}/kai-ray}/e2e/<key>/bin/

so only the first run pays for module download and compilation. Each module is built by one
``go build`` (its binaries share the compile work), with ``-trimpath`` and stripped symbols.

    python -m realcluster.build          # build if needed, print the binaries' directory
"""

from __future__ import annotations

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


def _default_name(package: str) -> str:
    """The file name ``go build -o DIR/`` gives a main package (a /vN suffix is skipped)."""
    parts = package.split("/")
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


def cache_key(go_ver: str) -> str:
    """Changes whenever a pinned version, the toolchain or the flags change."""
    digest = hashlib.sha256()
    digest.update(go_ver.encode())
    digest.update(repr(BUILD_FLAGS).encode())
    for target in TARGETS:
        digest.update(f"{target.module} {target.package} {target.name}\n".encode())
    for module in sorted({t.module for t in TARGETS}):
        for name in ("go.mod", "go.sum"):
            digest.update((GO_DIR / module / name).read_bytes())
    return digest.hexdigest()[:16]


def pinned_versions() -> dict[str, str]:
    """module path -> version of the components we build, read from the harness go.mod files."""
    wanted = ("k8s.io/kubernetes", "go.etcd.io/etcd/server/v3", "sigs.k8s.io/kwok")
    found: dict[str, str] = {}
    for module in sorted({t.module for t in TARGETS}):
        for line in (GO_DIR / module / "go.mod").read_text().splitlines():
            fields = line.replace("require", "").split()
            if len(fields) >= 2 and fields[0] in wanted:
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


def _go_build(go: str, module: str, out: Path, log: Path, progress: bool) -> None:
    targets = [t for t in TARGETS if t.module == module]
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


def ensure_built(progress: bool = True) -> Path:
    """The directory holding the four binaries, building them first if this version set is new."""
    go = go_binary()
    version = go_version(go)
    home = cache_root() / "e2e" / cache_key(version)
    bin_dir = home / "bin"
    stamp = home / "build.json"

    def build() -> None:
        if progress:
            print(f"realcluster: building {', '.join(t.name for t in TARGETS)} into {home} ...", file=sys.stderr)
        started = time.monotonic()
        staging = Path(tempfile.mkdtemp(prefix="bin-", dir=home))
        log = home / "build.log"
        log.write_bytes(b"")
        seconds: dict[str, float] = {}
        for module in sorted({t.module for t in TARGETS}):
            begun = time.monotonic()
            _go_build(go, module, staging, log, progress)
            seconds[module] = round(time.monotonic() - begun, 1)
        shutil.rmtree(bin_dir, ignore_errors=True)
        staging.rename(bin_dir)
        record = {
            "versions": pinned_versions(),
            "go": version,
            "seconds": seconds,
            "total_seconds": round(time.monotonic() - started, 1),
        }
        stamp.write_text(json.dumps(record, indent=2) + "\n")
        if progress:
            print(f"realcluster: built in {record['total_seconds']} s {seconds}", file=sys.stderr)

    build_once(home, stamp, build)
    return bin_dir


def build_record(bin_dir: Path) -> dict[str, object]:
    """What ``ensure_built`` wrote about the build of ``bin_dir`` (versions, seconds)."""
    loaded: dict[str, object] = json.loads((bin_dir.parent / "build.json").read_text())
    return loaded


def main() -> int:
    try:
        bin_dir = ensure_built()
    except (GoMissing, BuildFailed) as error:
        print(f"realcluster: {error}", file=sys.stderr)
        return 1
    print(bin_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
