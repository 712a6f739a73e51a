"""KAI with its bugs fixed: the oracle built once more, from KAI's module with small fixes in.

A disagreement no deliberate difference explains may be a bug of KAI v0.12's own. To say so
with evidence, the tier builds a second harness binary from a copy of KAI's module into which
a few fixes are written (``kai_fixes/*.go.in``, our code, hooked into KAI's files by one-line
insertions at the places named in ``HOOKS``), each off unless a request turns it on. When KAI
decides as kai-ray did once some of these fixes are on, the disagreement is that KAI bug,
named by its fixes ("kai-bug:<fix>+<fix>").

The binary lands beside the plain oracle's, keyed the same way plus these fixes:

    ${KAI_RAY_CACHE:-~/.cache/kai-ray}/oracle-fixed/<key>/oracle
"""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from realcluster.build import build_once, cache_root
from tests.oracle.harness import (
    BUILD_FLAGS,
    HERE,
    Oracle,
    OracleCrash,
    OracleTimeout,
    OracleUnavailable,
    go_build,
    go_env,
    pinned_kai,
    print_binary,
    source_files,
    toolchain,
)
from tests.oracle.manifests import Case

FIXES_DIR = HERE / "kai_fixes"

# The fixes, by name: what KAI v0.12.0 does wrong, and where.
FIXES: dict[str, str] = {
    "recorded-job-nodes": (
        "a victim search's step offers the nodes of the last step's victims only, while it evicts every pod "
        "of the recorded victim jobs (solvePartialJob, pkg/scheduler/actions/common/solvers/job_solver.go)"
    ),
    "moved-share": (
        "a shared pod moved to another GPU of its node loses its entry for the GPU it leaves while that share "
        "stays booked; undoing the eviction books it twice (addTask and RemoveTask, "
        "pkg/scheduler/api/node_info/node_info.go; Statement.Pipeline and unevict, "
        "pkg/scheduler/framework/statement.go)"
    ),
    "pipelined-on-idle": (
        "a pod pipelined onto idle GPUs (whole ones, or one a fraction opens) takes them off the node's releasing "
        "GPUs, not its idle ones, and a shared GPU that starts releasing later takes one more idle GPU off "
        "(addTaskResources, pkg/scheduler/api/node_info/node_info.go; addSharedTaskResourcesPerPodGroup, "
        "pkg/scheduler/api/node_info/gpu_sharing_node_info.go)"
    ),
    "nil-scenario": (
        "a victim search's step for a job with no pod left to place builds no scenario, and the idle-GPU filter "
        "reads it and panics (NewIdleGpusFilter, "
        "pkg/scheduler/actions/common/solvers/accumulated_scenario_filters/idle_gpus.go:60)"
    ),
    "tasks-cache": (
        "a job's pods to place and their request stay cached after a victim search evicted its running pods: the "
        "request reads as nothing, and the search builds no scenario (GetTasksToAllocate and "
        "GetTasksToAllocateInitResource, pkg/scheduler/api/podgroup_info/allocation_info.go)"
    ),
    "evicted-pipelined": (
        "a pod pipelined onto a node and evicted again is booked there as a releasing pod, so its GPU group counts "
        "as one more busy device (Statement.Evict then NodeInfo.UpdateTask; addSharedTaskResourcesPerPodGroup, "
        "pkg/scheduler/api/node_info/gpu_sharing_node_info.go)"
    ),
}


@dataclass(frozen=True)
class Hook:
    """One line (or a few) of ours written into a file of KAI's module, next to ``anchor``
    (which must occur exactly once)."""

    path: str  # in KAI's module
    anchor: str
    text: str
    before: bool = False  # insert before the anchor instead of after it


HOOKS: tuple[Hook, ...] = (
    Hook(
        "pkg/scheduler/api/node_info/node_info.go",
        "\tif task.IsSharedGPUAllocation() && allowTaskToExistOnDifferentGPU {\n",
        "\t\tni.oracleMoveAside(key)\n",
    ),
    Hook(
        "pkg/scheduler/api/node_info/node_info.go",
        '\tif ni.Node == nil {\n\t\treturn fmt.Errorf("node is nil during remove task',
        "\tif ni.oracleRemoved(key) {\n\t\treturn nil\n\t}\n",
        before=True,
    ),
    Hook(
        "pkg/scheduler/api/node_info/node_info.go",
        "func (ni *NodeInfo) UpdateTask(ti *pod_info.PodInfo) error {\n",
        "\tif handled, err := ni.oracleUpdateTask(ti); handled {\n\t\treturn err\n\t}\n",
    ),
    Hook(
        "pkg/scheduler/api/node_info/node_info.go",
        "\tcase pod_status.Pipelined:\n\t\tni.Releasing.Sub(requestedResourceWithoutSharedGPU)\n",
        "\t\tni.oraclePipelinedWhole(task, requestedResourceWithoutSharedGPU)\n",
    ),
    Hook(
        "pkg/scheduler/api/node_info/node_info.go",
        "\tcase pod_status.Pipelined:\n\t\tni.Releasing.Add(requestedResourceWithoutSharedGPU)\n",
        "\t\tni.oracleUnpipelinedWhole(task)\n",
    ),
    Hook(
        "pkg/scheduler/api/node_info/gpu_sharing_node_info.go",
        "\t\t\tni.Releasing.SubGPUs(1)\n\t\t}\n\tdefault:\n",
        "\t\t\tni.oraclePipelinedOpened(gpuGroup)\n",
        before=True,
    ),
    Hook(
        "pkg/scheduler/api/node_info/gpu_sharing_node_info.go",
        "\t\t\t// no other fractional was pipelined here yet\n\t\t\tni.Releasing.AddGPUs(1)\n",
        "\t\t\tni.oraclePipelinedClosed(gpuGroup)\n",
    ),
    Hook(
        "pkg/scheduler/actions/common/solvers/accumulated_scenario_filters/idle_gpus.go",
        "func NewIdleGpusFilter(\n\tscenario *scenario.ByNodeScenario, nodeInfosMap map[string]*node_info.NodeInfo)"
        " *AccumulatedIdleGpus {\n",
        "\tif oracleNoScenario(scenario) {\n\t\treturn nil\n\t}\n",
    ),
    Hook(
        "pkg/scheduler/api/podgroup_info/allocation_info.go",
        "\tisRealAllocation bool,\n) []*pod_info.PodInfo {\n",
        "\toracleForgetTasksToAllocate(podGroupInfo)\n",
    ),
    Hook(
        "pkg/scheduler/api/podgroup_info/allocation_info.go",
        "\tif podGroupInfo.tasksToAllocateInitResource != nil {\n",
        "\toracleForgetTasksToAllocate(podGroupInfo)\n",
        before=True,
    ),
    Hook(
        "pkg/scheduler/actions/common/solvers/job_solver.go",
        "\tfor scenarioToSolve := scenarioBuilder.GetValidScenario();",
        "\toracleAddRecordedJobNodes(ssn, state.recordedVictimsJobs, feasibleNodeMap)\n",
        before=True,
    ),
)

# Our files, and the package directory of KAI's module each goes into.
ADDED_FILES = {
    "node_info.go.in": "pkg/scheduler/api/node_info/oracle_fixes.go",
    "solvers.go.in": "pkg/scheduler/actions/common/solvers/oracle_fixes.go",
    "scenario_filters.go.in": "pkg/scheduler/actions/common/solvers/accumulated_scenario_filters/oracle_fixes.go",
    "podgroup_info.go.in": "pkg/scheduler/api/podgroup_info/oracle_fixes.go",
}


def apply_hook(source: str, hook: Hook) -> str:
    count = source.count(hook.anchor)
    if count != 1:
        raise OracleUnavailable(f"KAI fix hook: {hook.path} has {count} places like {hook.anchor.strip()[:60]!r}")
    at = source.index(hook.anchor) + (0 if hook.before else len(hook.anchor))
    return source[:at] + hook.text + source[at:]


def cache_key(go_version: str) -> str:
    digest = hashlib.sha256(f"{go_version}\n{BUILD_FLAGS!r}\nkaifixes\n{HOOKS!r}\n{ADDED_FILES!r}\n".encode())
    for path in [*source_files(), *sorted(FIXES_DIR.glob("*.go.in"))]:
        digest.update(f"{path.name}\n".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _module_dir(go: str) -> Path:
    """Where Go keeps the pinned KAI module (downloaded first if it is not there yet)."""
    done = subprocess.run(
        [go, "mod", "download", "-json", pinned_kai()],
        cwd=HERE,
        env=go_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        found: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError:
        found = {}
    if done.returncode != 0 or not found.get("Dir"):
        tail = (found.get("Error") or done.stderr.strip() or f"exit {done.returncode}").splitlines()[-1:]
        raise OracleUnavailable(f"could not get {pinned_kai()}: {' '.join(tail)}")
    return Path(found["Dir"])


def _writable(root: Path) -> None:
    """Go's module cache is read-only; the copy is edited."""
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


def ensure_fixed_built(progress: bool = True) -> Path:
    """The fixed oracle's binary, built first if this version of it is new."""
    go, version = toolchain()
    home = cache_root() / "oracle-fixed" / cache_key(version)
    binary = home / "oracle"

    def build() -> None:
        if progress:
            print(f"oracle: building {pinned_kai()} with fixes into {home} (once) ...", file=sys.stderr)
        started = time.monotonic()
        kai, src = home / "kai", home / "src"
        for stale in (kai, src):
            if stale.exists():
                shutil.rmtree(stale)
        shutil.copytree(_module_dir(go), kai)
        _writable(kai)
        for hook in HOOKS:
            target = kai / hook.path
            target.write_text(apply_hook(target.read_text(), hook))
        for name, destination in ADDED_FILES.items():
            shutil.copyfile(FIXES_DIR / name, kai / destination)
        src.mkdir()
        for path in source_files():
            shutil.copyfile(path, src / path.name)
        module = pinned_kai().split("@")[0]
        with (src / "go.mod").open("a") as go_mod:
            go_mod.write(f"\nreplace {module} => {kai}\n")
        go_build(go, src, home, "oracle with fixes", progress, tags=("kaifixes",))
        if progress:
            print(f"oracle: built with fixes in {time.monotonic() - started:.1f} s", file=sys.stderr)

    build_once(home, binary, build)
    return binary


# A fix set whose runs panic this many times in a row is given up (a panic costs a process).
CRASHES_PER_SET = 3
# The fixes that each keep KAI from its panic: a panicking session is explained only by a set
# holding one of them (KAI's panic depends on its map walks, so another fix's run may simply
# not have panicked).
PANIC_FIXES = ("nil-scenario", "tasks-cache")


def named_fixes(verdict: str) -> list[str]:
    """The fixes a "kai-bug:<fix>+<fix>[ with deliberate <patch>]" verdict names; none for any
    other verdict."""
    kind, _, rest = verdict.partition(":")
    return rest.split(" ", 1)[0].split("+") if kind == "kai-bug" else []


def fix_sets(any_of: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every non-empty set of fixes (holding one of ``any_of``, if given), smallest first: the
    first that explains a case names it."""
    names = sorted(FIXES)
    for size in range(1, len(names) + 1):
        for fixes in itertools.combinations(names, size):
            if not any_of or set(any_of) & set(fixes):
                yield fixes


class FixedKai:
    """The fixed oracle, built and started on first use; unavailable (None answers) when it
    cannot be built, which leaves a disagreement a mismatch."""

    def __init__(self, reruns: int = 20) -> None:
        self.reruns = reruns
        self._oracle: Oracle | None = None
        self.unavailable: str | None = None

    def _running(self) -> Oracle | None:
        if self._oracle is None and self.unavailable is None:
            try:
                self._oracle = Oracle(ensure_fixed_built())
            except OracleUnavailable as error:
                self.unavailable = str(error)
                print(f"oracle: no fixed KAI: {error}", file=sys.stderr)
        return self._oracle

    def run(self, case: Case, fixes: Sequence[str]) -> dict[str, Any]:
        """KAI's outcome with ``fixes`` on; fails the caller when the fixed oracle cannot be built."""
        oracle = self._running()
        if oracle is None:
            raise OracleUnavailable(self.unavailable or "no fixed KAI")
        return oracle.run(case.documents, case.config, case.actions, case.now, case_id=case.case_id, fixes=fixes)

    def explain(
        self, case: Case, agrees: Callable[[dict[str, Any]], bool], any_of: tuple[str, ...] = ()
    ) -> tuple[str, dict[str, Any]] | None:
        """The smallest set of fixes (holding one of ``any_of``, if given) under which some KAI
        run decides as ``agrees`` accepts, as "fix+fix", with that run's outcome; or None."""
        if self._running() is None:
            return None
        for fixes in fix_sets(any_of):
            crashes = 0
            for _ in range(self.reruns):
                try:
                    kai = self.run(case, fixes)
                except (OracleCrash, OracleTimeout):
                    crashes += 1  # KAI's choices vary: another run may take another path
                    if crashes == CRASHES_PER_SET:
                        break
                    continue
                crashes = 0
                if agrees(kai):
                    return "+".join(fixes), kai
        return None

    def close(self) -> None:
        if self._oracle is not None:
            self._oracle.close()
            self._oracle = None


if __name__ == "__main__":
    raise SystemExit(print_binary(ensure_fixed_built))
