"""Gated pods through ``kai-ray schedule``: never placed while any gate is left, kai-ray's own gate
removed when the queue has room, other gates left to their owners (docs/admission-gating.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests import manifests as m
from tests.cli.conftest import RunCli
from tests.cli.test_schedule import decisions, schedule

GATE = "kai.scheduler/queue-admission"


def limited(name: str, gpu_limit: int) -> m.Manifest:
    resources = {r: dict(v) for r, v in m.UNLIMITED_RESOURCES.items()}
    resources["gpu"]["limit"] = gpu_limit
    return m.queue(name, resources=resources)


def cluster(*objects: m.Manifest) -> list[m.Manifest]:
    return [m.node("n1", gpu=8), limited("q", 4), *objects]


def job(name: str, gpu: int, gates: tuple[str, ...] = (GATE,), queue: str = "q") -> list[m.Manifest]:
    return [m.pod_group(name, queue), m.pod(name, queue, gpu=gpu, group=name, gates=gates)]


def pods(out: dict[str, Any]) -> dict[str, Any]:
    return {key.split("/", 1)[1]: pod for key, pod in out["pods"].items()}


def test_a_gated_pod_whose_queue_has_room_stays_pending_and_has_its_gate_removed(
    kai_ray: RunCli, tmp_path: Path
) -> None:
    pod = pods(decisions(kai_ray, tmp_path, cluster(*job("a", 2)), "-o", "json"))["a"]
    assert pod["status"] == "Pending" and pod["node"] is None  # the API server would refuse its bind
    assert pod["schedulingGates"] == {"names": [GATE], "state": "removing"}
    assert pod["reason"] == f"SchedulingGated: queue q has room; removing the gate {GATE}"


def test_a_gated_pod_over_its_queue_limit_keeps_the_gate_with_the_limit_as_reason(
    kai_ray: RunCli, tmp_path: Path
) -> None:
    out = decisions(kai_ray, tmp_path, cluster(*job("big", 6)), "-o", "json")
    pod = pods(out)["big"]
    assert pod["schedulingGates"]["state"] == "held"
    assert pod["reason"].startswith("OverLimit: queue q would exceed its gpu limit")
    assert pod["reason"].endswith(
        f"held by the scheduling gate {GATE}, hidden from cluster autoscalers until it can run"
    )
    assert out["podGroups"]["team/big"] == {"status": "Pending", "reason": pod["reason"]}


def test_one_cycle_admits_only_what_fits_together_in_the_session_order(kai_ray: RunCli, tmp_path: Path) -> None:
    objects = cluster(*job("a", 3), *job("b", 3), *job("c", 1))
    got = pods(decisions(kai_ray, tmp_path, objects, "-o", "json"))
    # a (3 GPUs) fills the limit of 4 but for 1: b no longer fits, c does.
    assert {k: p["schedulingGates"]["state"] for k, p in got.items()} == {"a": "removing", "b": "held", "c": "removing"}


def test_running_work_and_pending_admitted_pods_count_against_the_room(kai_ray: RunCli, tmp_path: Path) -> None:
    running = m.pod("run", "q", gpu=2, group="run", node_name="n1", phase="Running")
    stamp = {"kai.scheduler/queue-admitted-timestamp": "2026-01-02T23:53:20Z"}  # 400 s before NOW
    admitted = m.pod("adm", "q", gpu=2, group="adm", annotations=stamp)
    # The admitted pod does not fit the node (a node selector no node has): pending, its demand reserved.
    admitted["spec"]["nodeSelector"] = {"zone": "nowhere"}
    objects = cluster(m.pod_group("run", "q"), running, m.pod_group("adm", "q"), admitted, *job("late", 1))
    got = pods(decisions(kai_ray, tmp_path, objects, "-o", "json"))
    assert got["run"]["status"] == "Running" and got["adm"]["status"] == "Pending"
    assert got["late"]["schedulingGates"]["state"] == "held"
    assert got["late"]["reason"].startswith("OverLimit")


def test_a_pod_with_another_gate_is_never_placed_nor_ungated(kai_ray: RunCli, tmp_path: Path) -> None:
    objects = cluster(*job("x", 1, gates=("example.com/wait",)), *job("both", 1, gates=(GATE, "example.com/wait")))
    got = pods(decisions(kai_ray, tmp_path, objects, "-o", "json"))
    for name in ("x", "both"):
        assert got[name]["status"] == "Pending" and got[name]["schedulingGates"]["state"] == "foreign"
        assert got[name]["reason"].startswith("SchedulingGated: held by the scheduling gate example.com/wait;")


def test_a_gated_pod_of_a_missing_queue_stays_gated(kai_ray: RunCli, tmp_path: Path) -> None:
    got = pods(decisions(kai_ray, tmp_path, cluster(*job("lost", 1, queue="nope")), "-o", "json"))
    assert got["lost"]["schedulingGates"]["state"] == "held"
    assert got["lost"]["reason"].startswith("QueueDoesNotExist: queue nope does not exist;")


def test_the_text_output_shows_the_gate_column_only_when_a_pod_is_gated(kai_ray: RunCli, tmp_path: Path) -> None:
    gated = schedule(kai_ray, m.write(tmp_path / "g.yaml", cluster(*job("a", 1))), "-o", "text").out.splitlines()
    assert gated[0].split()[:3] == ["pod", "status", "gate"]
    assert f"removing: {GATE}" in gated[2]
    plain = schedule(kai_ray, m.write(tmp_path / "p.yaml", cluster(*job("a", 1, gates=()))), "-o", "text")
    assert "gate" not in plain.out.splitlines()[0].split()


def test_a_gated_gpu_memory_pod_is_judged_like_any_other(kai_ray: RunCli, tmp_path: Path) -> None:
    """A GPU-memory request asks its queue no GPUs until a node is chosen (as KAI counts it): the
    gate of such a pod comes off while its queue is below its limit."""
    group, pod = job("mem", 0)
    pod["metadata"]["annotations"]["gpu-memory"] = "2000"
    decided = pods(decisions(kai_ray, tmp_path, cluster(group, pod), "-o", "json"))["mem"]
    assert decided["schedulingGates"] == {"names": [GATE], "state": "removing"}
