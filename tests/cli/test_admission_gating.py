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


def test_an_admitted_pod_holds_its_room_only_for_the_configured_reservation_timeout(
    kai_ray: RunCli, tmp_path: Path
) -> None:
    stamp = {"kai.scheduler/queue-admitted-timestamp": "2026-01-02T23:53:20Z"}  # 400 s before NOW
    admitted = m.pod("adm", "q", gpu=4, group="adm", annotations=stamp)
    admitted["spec"]["nodeSelector"] = {"zone": "nowhere"}  # stuck for a reason that is not its queue
    objects = cluster(m.pod_group("adm", "q"), admitted, *job("late", 1))
    config = tmp_path / "config.yaml"
    states = {}
    for timeout in ("10m", "5m"):
        config.write_text(f"queueAdmissionGating:\n  reservationTimeout: {timeout}\n")
        got = pods(decisions(kai_ray, tmp_path, objects, "--config", str(config), "-o", "json"))
        states[timeout] = got["late"]["schedulingGates"]["state"]
    # Within the timeout the stuck pod's 4 GPUs fill the queue's limit; past it, they are let go.
    assert states == {"10m": "held", "5m": "removing"}


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


def no_gpu_quota(name: str, gpu_limit: int = -1) -> m.Manifest:
    """A queue owed no GPUs: its GPU fair share is what it gets of the cluster by its request."""
    resources = {r: dict(v) for r, v in m.UNLIMITED_RESOURCES.items()}
    resources["gpu"] = {"quota": 0, "overQuotaWeight": 1, "limit": gpu_limit}
    return m.queue(name, resources=resources)


def competing(backlog_gates: tuple[str, ...]) -> list[m.Manifest]:
    """8 GPUs and two queues owed none: ``a`` (limit 6) runs 2 GPUs and waits for 6 more, ``b``
    runs 6 and waits for 2. ``a``'s 6 do not fit its limit, so they wait whether gated or not."""
    return [
        m.node("n1", gpu=8),
        no_gpu_quota("a", gpu_limit=6),
        no_gpu_quota("b"),
        m.pod_group("a-run", "a"),
        m.pod("a-run", "a", gpu=2, group="a-run", node_name="n1", phase="Running"),
        *job("backlog", 6, gates=backlog_gates, queue="a"),
        m.pod_group("b-run", "b"),
        m.pod("b-run", "b", gpu=6, group="b-run", node_name="n1", phase="Running"),
        *job("b-more", 2, gates=(), queue="b"),
    ]


def gpu_shares(out: dict[str, Any]) -> dict[str, float]:
    return {name: q["fairShare"]["gpu"] for name, q in out["queues"].items()}


def test_a_gated_backlog_counts_in_its_queues_fair_share_as_if_it_were_pending(kai_ray: RunCli, tmp_path: Path) -> None:
    """KAI's design counts gated demand in the queue's request like pending demand, so gating a
    backlog changes no fair share: ``a`` asks 8 GPUs (2 running, 6 gated), ``b`` 8, and the 8 GPUs
    divide 4 and 4 (counting only ``a``'s running 2, it would be 2 and 6)."""
    gated_out = decisions(kai_ray, tmp_path, competing((GATE,)), "-o", "json")
    assert gpu_shares(gated_out) == {"a": 4, "b": 4}
    pending_out = decisions(kai_ray, tmp_path, competing(()), "-o", "json")
    assert gpu_shares(pending_out) == gpu_shares(gated_out)
    got = pods(gated_out)
    assert got["backlog"]["schedulingGates"]["state"] == "held"
    assert got["backlog"]["reason"].startswith("OverLimit: queue a would exceed its gpu limit")
    # A gated pod is no reclaimer: b stays above its fair share, and nothing of it is evicted.
    assert got["b-run"]["status"] == "Running" and got["a-run"]["status"] == "Running"
    assert all(p["status"] in ("Running", "Pending") for p in got.values())
