"""The kwok load test's arrivals mode, its pure parts: the batches, what is read from kai-ray's log,
the rows and the command line. The real cluster run is in tests/e2e/test_kwok_arrivals.py."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

import loadtests.kwok_load as kwok_load
from coordinator.decisions import Decisions
from coordinator.results import BindIntent, CycleResult, CycleStats
from k8s_adapter import runner
from k8s_adapter.decision_log import DecisionLog
from k8s_adapter.startup import StartupClock
from kai_ray.logs import TextFormatter
from loadtests.kwok_arrivals import (
    ArrivalResult,
    Batch,
    arrival_pods,
    arrival_rows,
    arrivals_ratio,
    arrivals_report,
    batch_plan,
    create_batches,
)
from loadtests.kwok_phase import KAI, KUBE, scheduler_command
from loadtests.scheduler_log import (
    LONG_ITERATION,
    LogFacts,
    iteration_text,
    longest_in_window,
    parse_scheduler_log,
    startup_breakdown,
    step_delta,
)


# ------------------------------------------------------------------ the batches
def test_the_batches_cover_every_pod_once_in_order_the_last_one_the_rest() -> None:
    plan = batch_plan(1_010, 250)
    assert [b.count for b in plan] == [250, 250, 250, 250, 10]
    covered = [i for b in plan for i in range(b.first, b.first + b.count)]
    assert covered == list(range(1_010))
    assert all(b.start == 0.0 for b in plan)  # as fast as accepted: only the previous batch is waited for


def test_a_rate_spaces_the_batches_by_their_pods() -> None:
    plan = batch_plan(1_000, 250, rate=100.0)
    assert [b.start for b in plan] == [0.0, 2.5, 5.0, 7.5]


def test_no_pods_no_batches_and_nonsense_refused() -> None:
    assert batch_plan(0, 250) == []
    assert batch_plan(3, 250) == [Batch(0.0, 0, 3)]
    with pytest.raises(ValueError):
        batch_plan(10, 0)
    with pytest.raises(ValueError):
        batch_plan(10, 5, rate=0.0)


class RecordingApi:
    """Accepts every POST after a turn of the event loop, recording how many were in flight."""

    def __init__(self) -> None:
        self.in_flight: set[str] = set()
        self.accepted: list[str] = []
        self.overlaps: list[tuple[str, set[str]]] = []  # a pod sent while pods of another batch were in flight

    async def request(self, method: str, path: str, body: dict[str, Any] | None = None, **_: Any) -> None:
        assert method == "POST" and body is not None
        name = body["metadata"]["name"]
        batch = name.split("-")[0]
        others = {n for n in self.in_flight if n.split("-")[0] != batch}
        if others:
            self.overlaps.append((name, others))
        self.in_flight.add(name)
        await asyncio.sleep(0)
        self.in_flight.discard(name)
        self.accepted.append(name)


def test_each_batch_is_accepted_whole_before_the_next_is_sent_its_pods_concurrently() -> None:
    api = RecordingApi()
    pods: list[tuple[str, dict[str, Any]]] = [
        ("/pods", {"kind": "Pod", "metadata": {"name": f"b{i // 100}-{i}"}}) for i in range(250)
    ]
    created: dict[str, float] = {}
    errors: list[str] = []
    asyncio.run(create_batches(api, pods, batch_plan(250, 100), created, errors))  # type: ignore[arg-type]
    assert not errors and not api.overlaps
    assert set(created) == {obj["metadata"]["name"] for _, obj in pods}
    first_of_next = api.accepted.index("b1-100")
    assert set(api.accepted[:first_of_next]) == {f"b0-{i}" for i in range(100)}


def test_the_arriving_pods_are_bare_single_gpu_pods_of_the_scheduler() -> None:
    pods = arrival_pods(3, KAI)
    names = [obj["metadata"]["name"] for _, obj in pods]
    assert len(set(names)) == 3
    for _, obj in pods:
        assert obj["spec"]["schedulerName"] == KAI
        assert "pod-group-name" not in (obj["metadata"].get("annotations") or {})  # the pod grouper's work
        assert obj["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}


def test_kai_ray_arrives_at_its_defaults_the_preloaded_phases_as_the_chart_runs_it() -> None:
    class Cluster:  # only its kubeconfig is asked for
        def kubeconfig(self, who: str) -> Path:
            return Path(f"/nonexistent/{who}.kubeconfig")

    cluster: Any = Cluster()
    defaults = scheduler_command(cluster, KAI, None, 9999, as_chart=False)
    assert defaults[:4] == [sys.executable, "-m", "kai_ray", "run"]
    assert "--no-pod-grouper" not in defaults and "--no-mark-disruption-target" not in defaults
    assert "--no-pod-grouper" in scheduler_command(cluster, KAI, None, 9999)


# ------------------------------------------------------------------ kai-ray's log
def _logged(records: list[logging.LogRecord]) -> str:
    formatter = TextFormatter()
    return "\n".join(formatter.format(r) for r in records)


def test_the_cycle_summaries_kai_ray_writes_are_read_back(caplog: pytest.LogCaptureFixture) -> None:
    log = DecisionLog()
    binds = [BindIntent(f"default/p{i}", "node-1", (), "") for i in range(3)]
    with caplog.at_level(logging.INFO, logger="kai_ray.decisions"):
        log.cycle(1, CycleResult(Decisions(), binds=binds, stats=CycleStats(seconds=0.25)))
        log.cycle(2, CycleResult(Decisions(), binds=binds[:1], stats=CycleStats(seconds=1.5)))
    facts = parse_scheduler_log(_logged(caplog.records) + "\nsomething else entirely")
    assert facts.cycles == 2
    assert facts.cycle_binds == 4
    assert facts.longest_cycle == pytest.approx(1.5)
    assert facts.cycle_seconds == pytest.approx(1.75)
    assert facts.longest_iteration is None


def test_the_long_iterations_the_loop_warns_of_are_read_back() -> None:
    # The loop's own format string: if its wording changes, the parser has to follow.
    message = "a scheduler iteration took %.1fs"
    assert message in inspect.getsource(runner.SchedulerLoop.run)
    text = "\n".join(f"2026-01-01 00:00:00,000 WARNING k8s_adapter.runner: {message % s}" for s in (12.04, 31.6))
    text += "\n... INFO pod_grouper.live: could not group default/a@1 yet: 500"
    facts = parse_scheduler_log(text)
    assert facts.long_iterations == (12.0, 31.6)
    assert facts.longest_iteration == 31.6
    assert facts.grouping_retries == 1
    assert LONG_ITERATION.search("a scheduler iteration took 0.5s")


def test_steps_over_the_window_are_the_difference_of_two_readings() -> None:
    before = {"cycle": (10, 2.0), "bind": (4, 1.0), "group": (3, 5.0)}
    after = {"cycle": (25, 3.5), "bind": (4, 1.0), "group": (5, 9.25), "status": (2, 0.5)}
    assert step_delta(before, after) == {"cycle": (15, 1.5), "group": (2, 4.25), "status": (2, 0.5)}


# ------------------------------------------------------------------ the rows
def _result(scheduler: str, bound: int = 1_000, created_in: float = 10.0, all_bound_at: float = 25.0) -> ArrivalResult:
    return ArrivalResult(
        name="500 nodes / 1000 pods arriving",
        scheduler=scheduler,
        nodes=500,
        pods=1_000,
        bound=bound,
        created_in=created_in,
        all_bound_at=all_bound_at,
        batch=250,
        rate=None,
        latencies=[1.0, 2.0, 3.0, 4.0],
        requests_by_kind={"POST pods": 1_000, "POST pods/binding": 1_000, "POST podgroups": 500},
        cpu_seconds={"kube-apiserver": 12.3, "scheduler": 4.0},
        steps={"group": (2, 8.0)} if scheduler == KAI else {},
        log=LogFacts(cycles=7, cycle_seconds=0.5, longest_cycle=0.2, cycle_binds=1_000) if scheduler == KAI else None,
    )


def test_a_row_says_when_the_pods_were_made_and_when_the_last_was_bound() -> None:
    kai, kube = _result(KAI, all_bound_at=40.0), _result(KUBE, all_bound_at=20.0)
    assert kai.after_last_create == pytest.approx(30.0)
    assert kai.pods_per_second == pytest.approx(25.0)
    assert arrivals_ratio([kai, kube]) == pytest.approx(0.5)
    assert arrivals_ratio([kai]) is None
    rows = arrival_rows([kai, kube])
    assert rows[0][:8] == ["500 nodes / 1000 pods arriving", "kai-ray", "1000/1000", "10.0", "40.0", "30.0", "25.0"] + [
        "3.0"
    ]
    assert rows[0][-1] == "none logged (<10)"  # nothing over ten periods: said, not guessed
    assert rows[1][-1] == "-"  # kube-scheduler: no kai-ray log
    longer = _result(KAI)
    longer.log = LogFacts(long_iterations=(11.0, 14.5))
    assert arrival_rows([longer])[0][-1] == "14.5"


def test_the_report_gives_the_ratio_requests_per_bound_pod_and_kai_rays_steps() -> None:
    text = arrivals_report([_result(KAI, all_bound_at=40.0), _result(KUBE, all_bound_at=20.0)])
    assert "kai-ray / kube-scheduler pods/s: 0.50x" in text
    assert "2.50 in all; POST pods 1.00, POST pods/binding 1.00, POST podgroups 0.50" in text
    assert "group 2 / 8.0" in text
    assert "7 busy cycles" in text
    assert arrivals_report([]) == ""


# ------------------------------------------------------------------ the command line
def test_the_modes_choose_the_phases() -> None:
    assert kwok_load.phases("both", []) == (["kai-ray", "kube-scheduler", "gangs"], ["kai-ray", "kube-scheduler"])
    assert kwok_load.phases("arrivals", ["gangs"]) == ([], ["kai-ray", "kube-scheduler"])
    assert kwok_load.phases("preloaded", ["kube-scheduler"]) == (["kai-ray", "gangs"], [])


def test_nodes_and_pods_given_set_both_modes_and_quick_arrivals_are_small() -> None:
    size = kwok_load.chosen_size(kwok_load.FULL, 2_000, 4_000, None)
    assert (size.nodes, size.pods, size.arrival_nodes, size.arrival_pods) == (2_000, 4_000, 2_000, 4_000)
    assert size.gangs == kwok_load.FULL.gangs
    assert kwok_load.chosen_size(kwok_load.QUICK, None, None, None) == kwok_load.QUICK
    assert kwok_load.QUICK.arrival_pods < kwok_load.QUICK.pods  # CI's budget: about two minutes for arrivals


def test_an_arriving_pod_left_unbound_fails_the_run_and_the_json_has_the_rows(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    asked: list[tuple[Any, ...]] = []

    async def preloaded(*args: Any) -> list[Any]:
        asked.append(("preloaded", *args))
        return []

    async def arriving(size: Any, shards: Any, which: Any, batch: int, rate: Any) -> list[ArrivalResult]:
        asked.append(("arrivals", which, batch, rate))
        return [_result(KAI, bound=999), _result(KUBE)]

    monkeypatch.setattr(kwok_load, "ensure_built", lambda: Path())
    monkeypatch.setattr(kwok_load, "run_preloaded", preloaded)
    monkeypatch.setattr(kwok_load, "run_arriving", arriving)
    out = tmp_path / "kwok.json"
    code = kwok_load.main(["--quick", "--mode", "arrivals", "--batch", "100", "--json", str(out)])
    assert code == 1
    assert asked == [("preloaded", kwok_load.QUICK, None, []), ("arrivals", ["kai-ray", "kube-scheduler"], 100, None)]
    written = json.loads(out.read_text())
    assert [row["scheduler"] for row in written["arrivals"]] == [KAI, KUBE]
    assert written["arrivals"][0]["bound"] == 999
    assert written["arrivals"][0]["afterLastCreate"] == pytest.approx(15.0)
    assert written["arrivals"][0]["log"]["cycles"] == 7
    assert written["size"]["arrival_pods"] == kwok_load.QUICK.arrival_pods
    assert written["arrivalsRatio"] == pytest.approx(999 / 1_000)


def test_all_bound_exits_0(monkeypatch: pytest.MonkeyPatch) -> None:
    async def nothing(*args: Any) -> list[Any]:
        return []

    async def arriving(*args: Any) -> list[ArrivalResult]:
        return [_result(KAI), _result(KUBE)]

    monkeypatch.setattr(kwok_load, "ensure_built", lambda: Path())
    monkeypatch.setattr(kwok_load, "run_preloaded", nothing)
    monkeypatch.setattr(kwok_load, "run_arriving", arriving)
    assert kwok_load.main(["--mode", "arrivals"]) == 0


def test_the_longest_iteration_in_a_window_is_exact_when_it_grew_else_bounded() -> None:
    inf = float("inf")
    before = (2.5, {0.256: 10, 0.512: 12, inf: 12})
    assert longest_in_window(before, (3.1, {0.256: 10, 0.512: 12, 4.096: 13, inf: 13})) == (3.1, True)
    assert longest_in_window(before, (2.5, {0.256: 14, 0.512: 17, inf: 17})) == (0.512, False)
    assert longest_in_window(before, before) is None  # no iteration ended in the window
    assert iteration_text((0.512, False), None) == "<= 0.512" and iteration_text((3.1, True), None) == "3.10"
    assert iteration_text(None, None) == "-"


def test_kai_rays_start_up_line_is_read_back(caplog: pytest.LogCaptureFixture) -> None:
    clock = StartupClock(origin=0.0)
    with caplog.at_level(logging.INFO, logger="k8s_adapter.startup"):
        for step in ("loop", "nodes", "tables", "listed", "decoded", "sent", "cycled", "bound"):
            clock.mark(step)
    found = startup_breakdown(_logged(caplog.records))
    assert found is not None
    assert found[0] == pytest.approx(clock.marks["bound"], abs=0.01)
    assert found[1].startswith("imports ") and "first bind sent" in found[1] and "_at=" not in found[1]
