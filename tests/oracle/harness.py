"""The KAI oracle harness (the Go module beside this file): build it once, run sessions through it.

The binary lands in a cache outside the repository, keyed by a hash of the module's
go.mod, go.sum and sources, the Go version and the build flags:

    ${KAI_RAY_CACHE:-${XDG_CACHE_HOME:-~/.cache}/kai-ray}/oracle/<key>/oracle

so only the first run downloads KAI and Kubernetes and compiles them (minutes); later runs
start in well under a second. ``Oracle`` keeps one harness process for many sessions
(``--batch``: one JSON line per request and per answer), so the start-up is paid once.

    python -m tests.oracle.harness          # build if needed, print the binary's path
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from realcluster.build import GoMissing, build_once, cache_root, go_version, run_go_build

HERE = Path(__file__).resolve().parent
BUILD_FLAGS = ("-trimpath", "-ldflags=-s -w")


class OracleUnavailable(RuntimeError):
    """No Go toolchain, or the module could not be downloaded or built; the message is one line."""


class OracleTimeout(RuntimeError):
    """KAI did not finish the session in time (KAI v0.12's victim search can loop forever)."""


class OracleCrash(RuntimeError):
    """The harness process died on a case (a Go panic in KAI's code); the message ends with its log."""


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise OracleUnavailable("the KAI oracle needs a Go toolchain (go 1.24 or newer) on PATH; none found")
    return go


def _go_version(go: str) -> str:
    try:
        return go_version(go)  # the e2e tier's: same cache rules, same key ingredients
    except GoMissing as error:
        raise OracleUnavailable(str(error)) from None


def source_files() -> list[Path]:
    return sorted([HERE / "go.mod", HERE / "go.sum", *HERE.glob("*.go")])


def cache_key(go_version: str) -> str:
    digest = hashlib.sha256(f"{go_version}\n{BUILD_FLAGS!r}\n".encode())
    for path in source_files():
        digest.update(f"{path.name}\n".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def pinned_kai() -> str:
    """KAI's module and version as go.mod pins them."""
    for line in (HERE / "go.mod").read_text().splitlines():
        fields = line.split()
        if fields[:1] == ["require"]:
            fields = fields[1:]
        if fields and fields[0].endswith("/KAI-scheduler"):
            return f"{fields[0]}@{fields[1]}"
    raise OracleUnavailable("tests/oracle/go.mod does not require KAI-scheduler")


def toolchain() -> tuple[str, str]:
    """The Go binary on PATH and its version (part of every oracle build's cache key)."""
    go = _go()
    return go, _go_version(go)


def go_env() -> dict[str, str]:
    """The environment of an oracle build: the local toolchain, no cgo, the pins as they are."""
    env = dict(os.environ, GOTOOLCHAIN="local", CGO_ENABLED=os.environ.get("CGO_ENABLED", "0"))
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=readonly").strip()  # the pins are the pins
    return env


def go_build(go: str, source: Path, home: Path, label: str, progress: bool, tags: Sequence[str] = ()) -> Path:
    """Build the harness module at ``source`` into ``home``/oracle (staged, then renamed, so a
    half-written binary is never taken for a built one); the log is ``home``/build.log."""
    log = home / "build.log"
    log.write_bytes(b"")
    staging = home / "oracle.partial"
    tag_args = ["-tags", ",".join(tags)] if tags else []
    command = [go, "build", "-v", *tag_args, *BUILD_FLAGS, "-o", str(staging), "."]
    if run_go_build(command, source, go_env(), log, label, progress) != 0:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        raise OracleUnavailable(f"building the {label} ({pinned_kai()}) failed (log {log}): {' | '.join(lines[-3:])}")
    binary = home / "oracle"
    staging.rename(binary)
    return binary


def ensure_built(progress: bool = True) -> Path:
    """The oracle binary, built first if this version of the harness is new."""
    go, version = toolchain()
    home = cache_root() / "oracle" / cache_key(version)
    binary = home / "oracle"

    def build() -> None:
        if progress:
            print(f"oracle: building {pinned_kai()} into {home} (minutes, once) ...", file=sys.stderr)
        started = time.monotonic()
        go_build(go, HERE, home, "oracle", progress)
        seconds = round(time.monotonic() - started, 1)
        (home / "build.json").write_text(json.dumps({"kai": pinned_kai(), "go": version, "seconds": seconds}))
        if progress:
            print(f"oracle: built in {seconds} s", file=sys.stderr)

    build_once(home, binary, build)
    return binary


class Oracle:
    """One harness process answering session requests in order (JSON lines both ways)."""

    def __init__(self, binary: Path | None = None, timeout: float = 30.0) -> None:
        self.binary = binary or ensure_built()
        self.timeout = timeout
        self._process: subprocess.Popen[str] | None = None
        self._log = tempfile.TemporaryFile(mode="w+b")  # noqa: SIM115 - KAI's stderr, closed in close()
        self.sessions = 0

    def _start(self) -> subprocess.Popen[str]:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                [str(self.binary), "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,
                text=True,
                bufsize=1,
            )
        return self._process

    def run(
        self,
        documents: Sequence[Mapping[str, Any]],
        config: Mapping[str, Any] | None = None,
        actions: str = "",
        now: str = "",
        write_zip: Path | None = None,
        case_id: str = "",
        fixes: Sequence[str] = (),
    ) -> dict[str, Any]:
        """KAI's outcome for one cluster (a list of manifests), in `kai-ray schedule -o json` shape;
        ``fixes`` turns on fixes to KAI (only the binary ``kai_fixes`` builds has them)."""
        request = {
            "id": case_id,
            "snapshot": {"apiVersion": "v1", "kind": "List", "items": list(documents)},
            "config": dict(config or {}),
            "actions": actions,
            "now": now,
            "writeZip": str(write_zip) if write_zip else "",
            "fixes": list(fixes),
        }
        return self._ask(request, case_id)

    def run_file(self, path: Path, now: str = "", actions: str = "", case_id: str = "") -> dict[str, Any]:
        """KAI's outcome for a snapshot file: a List, or a /get-snapshot ZIP with its own config."""
        return self._ask({"id": case_id, "file": str(path), "now": now, "actions": actions}, case_id)

    def _ask(self, request: Mapping[str, Any], case_id: str) -> dict[str, Any]:
        process = self._start()
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(request) + "\n")
        process.stdin.flush()
        ready, _, _ = select.select([process.stdout], [], [], self.timeout)
        if not ready:  # the session never ends: the process is stopped, the next case gets a new one
            self._kill()
            raise OracleTimeout(f"KAI did not finish case {case_id!r} in {self.timeout:g} s")
        line = process.stdout.readline()
        if not line:
            code = process.wait()
            self._process = None
            raise OracleCrash(f"oracle exited ({code}) on case {case_id!r}: {self._log_tail()}")
        answer: dict[str, Any] = json.loads(line)
        self.sessions += 1
        if answer.get("error"):
            raise RuntimeError(f"oracle: case {case_id!r}: {answer['error']}")
        result: dict[str, Any] = answer["result"]
        return result

    def _log_tail(self) -> str:
        """The panic (or last lines) KAI wrote, then the log starts afresh."""
        self._log.seek(0)
        lines = [line for line in self._log.read().decode(errors="replace").splitlines() if line.strip()]
        self._log.seek(0)
        self._log.truncate()
        panic = next((i for i, line in enumerate(lines) if line.startswith("panic:")), None)
        picked = lines[panic : panic + 12] if panic is not None else lines[-5:]
        return " | ".join(picked)

    def _kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def close(self) -> None:
        self._log.close()
        if self._process is not None:
            if self._process.stdin:
                self._process.stdin.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None

    def __enter__(self) -> Oracle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def print_binary(build: Callable[[], Path]) -> int:
    """A builder's command line: build if needed, print the binary's path (or one error line)."""
    try:
        print(build())
    except OracleUnavailable as error:
        print(f"oracle: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(print_binary(ensure_built))
