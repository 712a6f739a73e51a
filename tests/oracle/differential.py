"""The oracle tier: kai-ray against KAI's own scheduler code (needs Go; run by .ci/run).

    .venv/bin/python -m pytest tests/oracle/differential.py

Not collected by the default run (the file name does not start with ``test_``). The first
run builds the harness into the cache outside the repository (minutes); later runs start
in seconds. ``KAI_RAY_ORACLE_SEEDS`` sets how many seeded clusters each focus gets (default
100, so 600 in all) and ``KAI_RAY_ORACLE_CONTENDED_SEEDS`` how many each contended focus gets
(default 20, so 80 in all, about 65 s more); ``python -m tests.oracle`` is the long run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kai_ray.app.runtime import in_process_coordinator
from kai_ray.config import SchedulerConfig
from kai_ray.deltas import ClusterDeltas
from kai_ray.io.config import config_from_mapping
from kai_ray.io.fields import parse_time
from kai_ray.io.kai_snapshot import read_kai_snapshot
from kai_ray.io.snapshot_loader import load_snapshot
from kai_ray.model import ClusterSnapshot
from tests.oracle.cases import case_files, decisions, load_case
from tests.oracle.clusters import FOCI, generate
from tests.oracle.compare import check, run_case, verdict
from tests.oracle.contended import CONTENDED_FOCI
from tests.oracle.harness import Oracle, OracleUnavailable, ensure_built
from tests.oracle.kai_fixes import FixedKai

SEEDS = int(os.environ.get("KAI_RAY_ORACLE_SEEDS", "100"))
CONTENDED_SEEDS = int(os.environ.get("KAI_RAY_ORACLE_CONTENDED_SEEDS", "20"))
AGREE = ("same", "equivalent", "kai-varies")  # kai-ray gave (one of) KAI's answers
EXPLAINED = ("deliberate", "kai-bug")  # a README entry, or KAI decides as kai-ray once its bug is fixed
NOT_COMPARED = ("kai-hang", "kai-crash")  # KAI's session never ended, or its code panicked


@pytest.fixture(scope="module")
def oracle() -> Iterator[Oracle]:
    try:
        binary = ensure_built()
    except OracleUnavailable as error:
        pytest.exit(f"oracle tier: {error}", returncode=1)  # one line, and the run fails
    with Oracle(binary) as running:
        yield running


@pytest.fixture(scope="module")
def fixed(oracle: Oracle) -> Iterator[FixedKai]:
    """KAI with fixes to its own bugs, built on first use (a disagreement left over, a kai-bug
    case). It needs what the oracle needs, so it asks for the oracle: a run without Go skips
    its tests with the oracle's reason."""
    with_fixes = FixedKai()
    yield with_fixes
    with_fixes.close()


@pytest.mark.parametrize("focus", FOCI)
def test_seeded_clusters_are_decided_as_kai_decides(oracle: Oracle, fixed: FixedKai, focus: str) -> None:
    _compare_seeds(oracle, fixed, focus, FOCI.index(focus) * 100_000, SEEDS)


@pytest.mark.parametrize("focus", CONTENDED_FOCI)
def test_contended_clusters_are_decided_as_kai_decides(oracle: Oracle, fixed: FixedKai, focus: str) -> None:
    _compare_seeds(oracle, fixed, focus, (len(FOCI) + CONTENDED_FOCI.index(focus)) * 100_000, CONTENDED_SEEDS)


def _compare_seeds(oracle: Oracle, fixed: FixedKai, focus: str, first: int, count: int) -> None:
    unexplained = []
    counts: dict[str, int] = {}
    for seed in range(first, first + count):
        case = generate(seed, focus)
        result, diffs, _, _ = check(oracle, case, fixed=fixed)
        kind = result.split(":")[0]
        counts[kind] = counts.get(kind, 0) + 1
        if kind not in (*AGREE, *EXPLAINED, *NOT_COMPARED):
            unexplained.append(f"seed {seed}: {'; '.join(diffs[:3])}")
    hint = f"shrink with: python -m tests.oracle --focus {focus} --seeds <seed> --shrink --out DIR"
    assert not unexplained, f"{counts}; {hint}\n" + "\n".join(unexplained)
    compared = count - sum(counts.get(k, 0) for k in NOT_COMPARED)
    assert sum(counts.get(k, 0) for k in AGREE) >= 0.8 * compared, counts  # the comparison is not vacuous


@pytest.mark.parametrize("path", case_files(), ids=lambda p: p.stem)
def test_kai_still_decides_each_case_as_recorded(oracle: Oracle, path: Path) -> None:
    case, data = load_case(path)
    seen = []
    for _ in range(6):  # KAI's choice can vary from run to run; the recorded one must come up
        got = decisions(oracle.run(case.documents, case.config, case.actions, case.now, case_id=path.stem))
        if got == data["kai"]:
            return
        seen.append(got)
    pytest.fail(f"{path.name}: KAI no longer decides as recorded; it decided {seen[0]}")


@pytest.mark.parametrize(
    "path", [p for p in case_files() if load_case(p)[1]["verdict"] == "kai-bug"], ids=lambda p: p.stem
)
def test_kai_with_the_fix_decides_each_kai_bug_case_as_kai_ray(fixed: FixedKai, path: Path) -> None:
    case, data = load_case(path)
    ray = run_case(case)
    fixes = str(data["fix"]).split("+")
    seen = []
    for _ in range(6):  # KAI's choice can vary from run to run; kai-ray's must come up
        got = fixed.run(case, fixes)
        if verdict(case, got, ray)[0] != "mismatch":
            return
        seen.append(decisions(got))
    pytest.fail(f"{path.name}: KAI with {data['fix']} on does not decide as kai-ray; it decided {seen[0]}")


@pytest.mark.parametrize("seed", range(8))
def test_the_fixed_kai_with_no_fix_on_decides_as_kai(oracle: Oracle, fixed: FixedKai, seed: int) -> None:
    """The fixes' hooks do nothing while their fixes are off: the fixed build is KAI then."""
    case = generate(2_000_000 + seed, "contended")
    got = decisions(fixed.run(case, ()))
    seen = [decisions(oracle.run(case.documents, case.config, case.actions, case.now)) for _ in range(3)]
    assert got in seen, f"fixed KAI with no fix on: {got}\nKAI: {seen[0]}"


@pytest.mark.parametrize("seed", range(12))
def test_a_zip_the_harness_writes_replays_with_the_harness_decisions(oracle: Oracle, seed: int, tmp_path: Path) -> None:
    case = generate(1_000_000 + seed, "all")
    path = tmp_path / "snapshot.zip"
    direct = oracle.run(case.documents, case.config, case.actions, case.now, write_zip=path, case_id=f"zip-{seed}")
    replay = oracle.run_file(path, now=case.now, case_id=f"zip-{seed}-replay")
    kai = read_kai_snapshot(path)
    snapshot = load_snapshot(path, kai.config.get("schedulerName", "kai-scheduler"))
    ray = _kai_ray_on(snapshot, config_from_mapping(kai.config), case.now)
    assert decisions(replay) == decisions(direct)  # KAI reads its own ZIP as it read the cluster
    if decisions(ray) != decisions(replay):  # the same decisions, or one of KAI's when its choice varies
        again = [decisions(oracle.run_file(path, now=case.now)) for _ in range(5)]
        assert decisions(ray) in again, f"kai-ray {decisions(ray)}\nKAI {decisions(replay)}"


def _kai_ray_on(snapshot: ClusterSnapshot, config: SchedulerConfig, now: str) -> dict[str, Any]:
    coordinator = in_process_coordinator(config, 1)
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    result: dict[str, Any] = coordinator.cycle(parse_time(now), None).decisions.to_json()
    return result
