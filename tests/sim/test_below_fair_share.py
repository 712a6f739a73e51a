"""The report names, per queue, the time spent below its fair share and what held it there."""

from __future__ import annotations

from kai_ray.config import SchedulerConfig
from kai_ray.model import Node, Queue, QueueResource, ResourceVector
from kai_ray.runtime import in_process_coordinator
from kai_ray.sim.engine import InProcess, SimSettings, Simulation
from kai_ray.sim.report import SimMetrics
from kai_ray.sim.shortfall import reason_kind
from kai_ray.sim.summary import render_text
from kai_ray.sim.workload import UNLIMITED, JobSpec, Workload

GIB = 2**30
HORIZON = 1800.0
NO_QUOTA = QueueResource(quota=0, over_quota_weight=1, limit=-1)


def gpu_node(name: str, gpus: int) -> Node:
    return Node(name, ResourceVector.of(cpu=128_000, memory=1024 * GIB, gpu=gpus, pods=110))


def job(name: str, queue: str, gpus: float, arrival: float, duration: float) -> JobSpec:
    return JobSpec(name, "gpu", queue, 1, 1, gpus, None, 8000, 32 * GIB, "train", arrival, duration)


def run(nodes: list[Node], jobs: list[JobSpec]) -> SimMetrics:
    queues = (
        Queue("a", None, gpu=NO_QUOTA, cpu=UNLIMITED, memory=UNLIMITED, created=0),
        Queue("b", None, gpu=NO_QUOTA, cpu=UNLIMITED, memory=UNLIMITED, created=1),
    )
    coordinator = InProcess(in_process_coordinator(SchedulerConfig(), 1))
    return Simulation(coordinator, nodes, Workload(queues, tuple(jobs)), SimSettings(horizon=HORIZON)).run()


def test_a_queue_held_below_its_share_by_a_reclaim_rule_gets_the_rule_named() -> None:
    # b holds the only 8-GPU node, exactly its fair share: the two idle 4-GPU nodes count in a's
    # share, but a's 8-GPU pod fits on neither. a would go above its deserved quota (0), so KAI
    # lets it reclaim only from a queue above its fair share, and b is not.
    nodes = [gpu_node("big", 8), gpu_node("small-1", 4), gpu_node("small-2", 4)]
    metrics = run(nodes, [job("hold", "b", 8, 0, 1e9), job("wants", "a", 8, 60, 600)])
    report = metrics.to_json(len(nodes), 1)["belowFairShare"]

    starved = report["a"]
    assert HORIZON - 60 - 30 <= starved["longestSeconds"] <= starved["seconds"] <= HORIZON - 60
    assert starved["largestGapGpus"] == 8
    assert starved["idleGpus"] == 8 and starved["idleGpusItsPodsFit"] == 0
    top = starved["reasons"][0]
    assert top["share"] == 1.0
    assert top["jobs"] == ["sim/wants (1 pod of 8 GPUs)"]
    assert "reclaim: no queue to take from: a would go above its deserved quota" in top["reason"]
    assert "only a queue above its fair share may give back, and b is not" in top["reason"]
    assert report["b"]["seconds"] == 0  # b holds its share: never short

    text = render_text(metrics, len(nodes), 1, 0.0, 1.0)
    assert "below fair share" in text
    assert "and b is not" in text.split("below fair share", 1)[1]


def test_a_queue_that_reclaim_serves_is_short_only_until_the_next_cycle() -> None:
    # Here b holds 8 GPUs over its share of 4, so a's 4-GPU job reclaims at once.
    metrics = run([gpu_node("big", 8)], [job("hold", "b", 8, 0, 1e9), job("wants", "a", 4, 60, 600)])
    short = metrics.shortfall.queues["a"]
    assert metrics.evictions["reclaim"] == 1
    assert short.longest_seconds <= 60


def test_reasons_that_differ_only_in_figures_are_one_reason() -> None:
    one = "Resources were found for 0 pods while 32 are required: 335 node(s) didn't have enough resources: GPUs"
    other = "Resources were found for 1 pods while 32 are required: 340 node(s) didn't have enough resources: GPUs"
    assert reason_kind(one) == reason_kind(other)
    pods = "Resources were not found for pod sim/job-00398-{} due to: no nodes with enough resources were found"
    assert reason_kind(pods.format(4)) == reason_kind(pods.format(5))  # two pods of one gang
    named = "reclaim: no queue to take from: dept-2 would go above its deserved quota, and dept-1 is not"
    assert reason_kind(named) == named  # queue names keep their digits
