"""The report names, per queue, the time spent below its fair share and what held it there."""

from __future__ import annotations

from dataclasses import replace

from kai_ray.app.runtime import in_process_coordinator
from kai_ray.app.sim.engine import InProcess, SimSettings, Simulation
from kai_ray.app.sim.holding_rules import RULES, holding_rule, reason_kind, with_figures
from kai_ray.app.sim.report import SimMetrics
from kai_ray.app.sim.shortfall import LONG_STRETCH
from kai_ray.app.sim.summary import render_text
from kai_ray.app.sim.workload import UNLIMITED, JobSpec, Workload
from kai_ray.config import SchedulerConfig
from kai_ray.model import Node, Queue, QueueResource, ResourceVector

GIB = 2**30
HORIZON = 1800.0
NO_QUOTA = QueueResource(quota=0, over_quota_weight=1, limit=-1)


def gpu_node(name: str, gpus: int) -> Node:
    return Node(name, ResourceVector.of(cpu=128_000, memory=1024 * GIB, gpu=gpus, pods=110))


def job(name: str, queue: str, gpus: float, arrival: float, duration: float) -> JobSpec:
    return JobSpec(name, "gpu", queue, 1, 1, gpus, None, 8000, 32 * GIB, "train", arrival, duration)


def run(nodes: list[Node], jobs: list[JobSpec], b_quota: QueueResource = NO_QUOTA) -> SimMetrics:
    queues = (
        Queue("a", None, gpu=NO_QUOTA, cpu=UNLIMITED, memory=UNLIMITED, created=0),
        Queue("b", None, gpu=b_quota, cpu=UNLIMITED, memory=UNLIMITED, created=1),
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


def test_a_long_stretch_is_listed_with_the_rule_that_held_it_and_the_figures_behind_it() -> None:
    # As in the first test: a waits 29 simulated minutes, over the 10 the report lists one by one.
    nodes = [gpu_node("big", 8), gpu_node("small-1", 4), gpu_node("small-2", 4)]
    metrics = run(nodes, [job("hold", "b", 8, 0, 1e9), job("wants", "a", 8, 60, 600)])
    short = metrics.shortfall.queues["a"]
    assert [round(s.start) for s in short.long_stretches()] == [60]
    stretch = short.long_stretches()[0]
    assert stretch.length > LONG_STRETCH
    rule = dict(RULES)["only a queue above its fair share may give back"]
    assert stretch.held_by() == [(rule, 1.0)]
    assert stretch.unnamed_seconds == 0
    # The queues the rule compared, with what they held, their fair shares and deserved quotas.
    assert stretch.peak_reason_part() == (
        "reclaim: no queue to take from: a would go above its deserved quota: only a queue above its fair share "
        "may give back, and b is not"
    )
    peak = stretch.peak_text()
    assert peak.endswith("[GPUs: a holds 0 of fair share 8, deserved 0; b holds 8 = its fair share, deserved 0]")

    report = metrics.to_json(len(nodes), 1)["belowFairShare"]["a"]
    assert report["stretches"] == 1
    [listed] = report["longStretches"]
    assert listed["heldBy"] == [{"rule": rule, "share": 1.0}]
    assert listed["noRuleNamedShare"] == 0
    assert listed["largestGapGpus"] == 8
    assert listed["atLargestGap"]["reason"] == stretch.peak_reason_part()
    assert listed["atLargestGap"]["queues"] == {
        "a": {"held": 0, "fairShare": 8, "deserved": 0},
        "b": {"held": 8, "fairShare": 8, "deserved": 0},
    }

    text = render_text(metrics, len(nodes), 1, 0.0, 1.0)
    assert "1 stretch longer than 10m: a reclaim rule named for each" in text
    assert f"held by: 100% {rule}" in text


def test_victims_that_are_not_preemptible_are_named_as_what_holds_a_queue() -> None:
    # b's job is not preemptible (within b's quota): KAI's victims queue leaves it out.
    nodes = [gpu_node("big", 8), gpu_node("small-1", 4), gpu_node("small-2", 4)]
    hold = replace(job("hold", "b", 8, 0, 1e9), priority_class="build")
    quota = QueueResource(quota=8, over_quota_weight=1, limit=-1)
    metrics = run(nodes, [hold, job("wants", "a", 8, 60, 600)], b_quota=quota)
    [stretch] = metrics.shortfall.queues["a"].long_stretches()
    rule = dict(RULES)["the jobs other queues run are not preemptible"]
    assert stretch.held_by() == [(rule, 1.0)]
    assert stretch.peak_reason_part() == "reclaim: the jobs other queues run are not preemptible"


def test_a_long_stretch_no_rule_explains_is_called_out() -> None:
    # a's 8-GPU pod fits no node, however much is evicted: reclaim does not search and names no
    # rule, so the report says that no reason named one rather than charging the time to a rule.
    nodes = [gpu_node("small-1", 4), gpu_node("small-2", 4), gpu_node("small-3", 4)]
    metrics = run(nodes, [job("hold", "b", 4, 0, 1e9), job("wants", "a", 8, 60, 600)])
    [stretch] = metrics.shortfall.queues["a"].long_stretches()
    assert stretch.held_by() == []
    assert stretch.unnamed_seconds == stretch.seconds > LONG_STRETCH
    assert metrics.to_json(len(nodes), 1)["belowFairShare"]["a"]["longStretches"][0]["noRuleNamedShare"] == 1.0
    text = render_text(metrics, len(nodes), 1, 0.0, 1.0)
    assert "for part of these no waiting job's reason named a rule" in text
    assert "a 0.02h-0.50h: 100% of it" in text
    assert "held by: 100% no rule named" in text


def test_a_stretch_of_less_than_ten_minutes_is_not_listed() -> None:
    # The victim filter holds a as in the first test, but b's job ends after 5 minutes.
    nodes = [gpu_node("big", 8), gpu_node("small-1", 4), gpu_node("small-2", 4)]
    metrics = run(nodes, [job("hold", "b", 8, 0, 300), job("wants", "a", 8, 60, 600)])
    short = metrics.shortfall.queues["a"]
    assert 200 <= short.longest_seconds <= LONG_STRETCH
    assert short.long_stretches() == []
    assert metrics.to_json(len(nodes), 1)["belowFairShare"]["a"]["longStretches"] == []
    assert "no queue was short for longer than 10m at a stretch" in render_text(metrics, len(nodes), 1, 0.0, 1.0)


def test_holding_rule_reads_the_actions_part_of_a_reason() -> None:
    allocate = "Resources were found for 1 pods while 8 are required for gang scheduling"
    assert holding_rule(allocate) is None  # allocate's words name no rule
    assert holding_rule(f"{allocate}; preempt: no victims") is None
    for text, rule in RULES:
        assert holding_rule(f"{allocate}; reclaim: {text}") == rule
    filter_text = (
        f"{allocate}; reclaim: no queue to take from: dept-2 would go above its deserved quota: only a queue "
        "above its fair share may give back, and dept-1 is not"
    )
    assert holding_rule(filter_text) == dict(RULES)["only a queue above its fair share may give back"]


def test_figures_go_to_whole_queue_names_only() -> None:
    figures = {"dept-1": (10.0, 12.5, 20.0), "dept-1-team-1": (4.0, 4.0, None), "dept-2": (1.0, 1.0, 1.0)}
    text = with_figures("dept-1-team-1 and dept-1 but not pod sim/dept-2-0", figures)
    assert text == "dept-1-team-1 holds 4 = its fair share; dept-1 holds 10 of fair share 12.5, deserved 20"
