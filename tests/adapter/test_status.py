"""What the status writer sends, in KAI's words, and that an unchanged situation sends nothing new."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from k8s_adapter.api import Response
from k8s_adapter.cache import ClusterCache
from k8s_adapter.kinds import NODES, POD_GROUPS, PODS, QUEUES
from k8s_adapter.resource_status import pod_group_figures, queue_status
from k8s_adapter.status import REPIPELINE_AFTER, Eviction, StatusWriter
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.model import Pod, PodGroup, PodState, Queue, ResourceVector
from tests import manifests as m
from tests.adapter.fake_api import FakeApi, ok
from tests.adapter.status_scenario import REASON, scenario
from tests.builders import config

GIB = 1024**3
HALF = {"name": "half", "namespace": "team", "uid": "u-half"}
MESSAGE = "OverLimit: team-q quota has reached the allowable limit of GPUs."


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def recording() -> FakeApi:
    def answer(method: str, path: str, query: object, body: Any) -> Response:
        return ok(body if isinstance(body, dict) else {})

    return FakeApi(answer)


def calls(api: FakeApi, method: str, suffix: str) -> list[Any]:
    return [body for m, path, body in api.calls if m == method and path.endswith(suffix)]


def scheduling(api: FakeApi, group: str) -> list[Any]:
    """The schedulingConditions patches of a PodGroup (its resourcesStatus patches left out)."""
    return [b for b in calls(api, "PATCH", f"/podgroups/{group}/status") if "schedulingConditions" in b["status"]]


def events(api: FakeApi, reason: str | None = None) -> list[dict[str, Any]]:
    posted = calls(api, "POST", "/events")
    return [e for e in posted if reason is None or e["reason"] == reason]


async def test_a_pending_pod_gets_kais_condition_and_one_warning_event() -> None:
    outcome, cache = scenario()
    api, clock = recording(), Clock()
    writer = StatusWriter(api, report_after=2, clock=clock)  # type: ignore[arg-type]
    await writer.publish(outcome, cache)
    assert events(api, "Unschedulable") == []  # pending for less than two seconds: not reported yet
    assert [e["message"] for e in events(api, "Pipelined")] == ["Pod team/runs-1 was pipelined to node n1"]
    clock.now += 2
    await writer.publish(outcome, cache)
    [condition] = calls(api, "PATCH", "/pods/waits-0/status")[0]["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == ("PodScheduled", "False", "Unschedulable")
    assert condition["message"] == MESSAGE
    pod_events = [e for e in events(api, "Unschedulable") if e["involvedObject"]["kind"] == "Pod"]
    assert {e["involvedObject"]["uid"] for e in pod_events} == {"p-w0", "p-w1"}
    assert {(e["type"], e["message"], e["count"]) for e in pod_events} == {("Warning", MESSAGE, 1)}
    assert pod_events[0]["source"] == {"component": "kai-scheduler"}
    before = len(api.calls)
    for _ in range(5):  # unchanged, cycle after cycle: nothing is written
        clock.now += 1
        await writer.publish(outcome, cache)
    assert api.calls[before:] == []


async def test_an_unchanged_situation_is_one_event_whose_count_grows_every_five_minutes() -> None:
    outcome, cache = scenario()
    api, clock = recording(), Clock()
    writer = StatusWriter(api, report_after=0, resources_every=1e9, clock=clock)  # type: ignore[arg-type]
    await writer.publish(outcome, cache)
    first = len(events(api))
    for _ in range(30):  # half a minute of cycles
        clock.now += 1
        await writer.publish(outcome, cache)
    assert len(events(api)) == first
    assert not [path for m, path, _ in api.calls if m == "PATCH" and "/events/" in path]
    clock.now += 300
    await writer.publish(outcome, cache)
    repeats = [body for m, path, body in api.calls if m == "PATCH" and "/events/" in path]
    assert repeats and {r["count"] for r in repeats} == {2}
    assert len(events(api)) == first  # still one Event per situation


async def test_a_pending_pod_group_gets_kais_scheduling_condition_and_it_is_cleared_once_it_runs() -> None:
    outcome, cache = scenario()
    api = recording()
    writer = StatusWriter(api, report_after=0)  # type: ignore[arg-type]
    await writer.publish(outcome, cache)
    [patch] = scheduling(api, "waits")
    [condition] = patch["status"]["schedulingConditions"]
    assert condition["type"] == "UnschedulableOnNodePool" and condition["nodePool"] == "default"
    assert (condition["status"], condition["reason"], condition["message"]) == ("True", "Unschedulable", MESSAGE)
    assert condition["reasons"] == [{"reason": "OverLimit", "message": REASON.split(": ", 1)[1]}]
    assert condition["transitionID"] == "1"
    [group_event] = [e for e in events(api, "Unschedulable") if e["involvedObject"]["kind"] == "PodGroup"]
    assert group_event["involvedObject"] == {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "name": "waits",
        "namespace": "team",
        "uid": "u-waits",
    }
    assert group_event["type"] == "Normal"
    changed = "OverLimit: another limit now"
    for key in ("team/waits", "team/waits-0", "team/waits-1"):
        target = outcome.decisions.pod_groups if key == "team/waits" else outcome.decisions.pods
        target[key] = type(target[key])("Pending", None, (), changed)
    await writer.publish(outcome, cache)
    assert scheduling(api, "waits")[-1]["status"]["schedulingConditions"][0]["transitionID"] == "2"
    outcome.decisions.pod_groups["team/waits"] = type(outcome.decisions.pod_groups["team/waits"])("Running", None)
    await writer.publish(outcome, cache)
    assert scheduling(api, "waits")[-1] == {"status": {"schedulingConditions": []}}


async def test_a_gang_still_being_created_gets_kais_not_ready_event_and_no_pod_events() -> None:
    outcome, cache = scenario()
    api = recording()
    await StatusWriter(api, report_after=0).publish(outcome, cache)  # type: ignore[arg-type]
    [not_ready] = events(api, "NotReady")
    assert not_ready["involvedObject"]["name"] == "half"
    assert not_ready["message"] == "Job is not ready for scheduling. Waiting for 3 pods, currently 1 exist, 0 are gated"
    assert not [e for e in events(api) if e["involvedObject"]["name"] == "half-0"]
    assert calls(api, "PATCH", "/pods/half-0/status") == []


async def test_pod_group_and_queue_status_are_written_as_kais_controllers_write_them() -> None:
    outcome, cache = scenario()
    api = recording()
    writer = StatusWriter(api, report_after=0)  # type: ignore[arg-type]
    await writer.publish(outcome, cache)
    [runs] = [b for b in calls(api, "PATCH", "/podgroups/runs/status") if "resourcesStatus" in b["status"]]
    assert runs["status"]["resourcesStatus"] == {
        "allocated": {"cpu": "1500m", "memory": "1073741824", "nvidia.com/gpu": "2"},
        "allocatedNonPreemptible": {"cpu": "1500m", "memory": "1073741824", "nvidia.com/gpu": "2"},
        "requested": {"cpu": "2500m", "memory": "2147483648", "nvidia.com/gpu": "4"},
    }
    [waits] = [b for b in calls(api, "PATCH", "/podgroups/waits/status") if "resourcesStatus" in b["status"]]
    assert waits["status"]["resourcesStatus"]["allocated"] == {}
    [root] = calls(api, "PATCH", "/queues/root/status")
    [team] = calls(api, "PATCH", "/queues/team-q/status")
    assert root["status"]["childQueues"] == ["team-q"] and team["status"]["childQueues"] == []
    assert root["status"]["requested"] == team["status"]["requested"]
    assert team["status"]["requested"]["nvidia.com/gpu"] == "7"  # 2 + 2 + 2 + 1: every live pod of the queue
    assert team["status"]["allocatedNonPreemptible"] == {"cpu": "1500m", "memory": "1073741824", "nvidia.com/gpu": "2"}
    before = len(api.calls)
    writer._next_resources = 0.0  # noqa: SLF001 - the next publish recomputes; nothing changed, nothing is written
    await writer.publish(outcome, cache)
    assert not [path for _, path, _ in api.calls[before:] if path.endswith(("/queues/root/status", "runs/status"))]


async def test_binds_and_evictions_post_kais_events() -> None:
    api = recording()
    writer = StatusWriter(api)  # type: ignore[arg-type]
    await writer.bound([("team/a", "u-a", "n1", True, ""), ("team/b", "u-b", "n2", False, "409 Conflict")])
    [scheduled] = events(api, "Scheduled")
    assert scheduled["message"] == "Successfully assigned pod team/a to node n1 at node-pool default"
    [failed] = events(api, "FailedBinding")
    assert failed["type"] == "Warning" and failed["message"] == "Failed to bind pod team/b to node n2. 409 Conflict"
    [condition] = calls(api, "PATCH", "/pods/b/status")[0]["status"]["conditions"]
    assert condition["reason"] == "BindingError"
    message = "Pod team/v was preempted by workload team/big."
    await writer.evicted([Eviction("team/v", "u-v", "team/pg-v", "u-pgv", "reclaim", "team/big", message, 2)])
    on_pod, on_group = events(api, "Evict")
    assert on_pod["involvedObject"]["uid"] == "u-v" and on_pod["message"] == message
    assert on_group["involvedObject"]["uid"] == "u-pgv"
    assert on_group["metadata"]["annotations"] == {
        "num-evicted-pods": "2",
        "evictor-action-type": "reclaim",
        "evictor-pod-group-name": "big",
        "evictor-pod-group-namespace": "team",
    }


async def test_what_is_remembered_of_deleted_objects_is_dropped() -> None:
    """A long-running scheduler must not keep every pod and group it ever reported."""
    from coordinator.coordinator import CycleResult
    from coordinator.decisions import Decisions
    from k8s_adapter.kinds import POD_GROUPS, PODS

    outcome, cache = scenario()
    api, clock = recording(), Clock()
    writer = StatusWriter(api, report_after=0, clock=clock)  # type: ignore[arg-type]
    await writer.publish(outcome, cache)
    assert writer.last and writer.events._series  # noqa: SLF001
    cache.on_list(PODS, [])  # everything but the queues is deleted; a while later:
    cache.on_list(POD_GROUPS, [])
    cache.take_deltas()
    clock.now += 700
    await writer.publish(CycleResult(Decisions()), cache)
    assert writer.last == {} and writer.events._series == {}  # noqa: SLF001
    assert {kind for kind, _ in writer._resources} == {"queue"}  # noqa: SLF001 - the queues still exist


@pytest.mark.parametrize(
    "action, expected",
    [
        ("preempt", "Pod team/v was preempted by higher priority workload team/big"),
        ("reclaim", "Pod team/v was preempted by workload team/big."),
        ("consolidation", "Pod team/v was preempted and rescheduled due to bin packing (resource consolidation)"),
        ("stalegangeviction", "Workload doesn't meet the minimum required number of pods (3), evicting remaining pod"),
        ("runtimelimit", "Pod team/v was stopped: its workload ran longer than its expected runtime"),
    ],
)
def test_each_evicting_action_says_why_in_its_own_words(action: str, expected: str) -> None:
    """A pod stopped for running past its expected runtime is not told its gang fell apart."""
    from k8s_adapter import messages

    message = messages.eviction(action, "team/v", "team/big", 3)
    assert message.startswith(expected)
    others = {"preempt", "reclaim", "consolidation", "stalegangeviction", "runtimelimit"} - {action}
    assert all(message != messages.eviction(other, "team/v", "team/big", 3) for other in others)


def test_a_semi_preemptible_groups_non_preemptible_figure_is_its_protected_minimum() -> None:
    # Three replicas of one GPU run, two protected: the queue's non-preemptible allocation (what
    # its quota must hold) is two GPUs, its allocation three.
    group = PodGroup("team", "serve", "team-q", 50, False, min_member=2, semi_preemptible=True)
    gpu = ResourceVector.of(cpu=1000, memory=GIB, gpu=1, pods=1)
    pods = [
        Pod("team", f"serve-{i}", state=PodState.RUNNING, node="n", requests=gpu, created=float(i), pod_group="serve")
        for i in range(3)
    ]
    figures = pod_group_figures({group.key: group}, [(p, group.key) for p in pods], {})
    status = figures[group.key].as_status()
    assert status["allocated"]["nvidia.com/gpu"] == "3"
    assert status["allocatedNonPreemptible"] == {"cpu": "2", "memory": str(2 * GIB), "nvidia.com/gpu": "2"}
    queue = queue_status({"team-q": Queue("team-q")}, {group.key: group}, figures)["team-q"]
    assert queue["allocatedNonPreemptible"] == status["allocatedNonPreemptible"]


async def test_kais_not_ready_event_counts_the_gangs_gated_pods() -> None:
    """KAI counts a gang's gated pods among those that exist and says how many are gated: they
    are not ready until their gates go. The count comes from a real cycle."""
    cache = ClusterCache()
    cache.on_list(NODES, [m.node("n1", gpu=8)])
    cache.on_list(QUEUES, [m.queue("q")])
    cache.on_list(POD_GROUPS, [{**m.pod_group("half", "q", min_member=3), "metadata": HALF}])
    members = [m.pod(f"half-{i}", group="half", gpu=1) for i in range(3)]
    for manifest in members[1:]:
        manifest["spec"]["schedulingGates"] = [{"name": "kai.scheduler/queue-admission"}]
    cache.on_list(PODS, members)
    coordinator = in_process_coordinator(config())
    coordinator.apply(cache.take_deltas())
    outcome = coordinator.cycle(1_000.0)
    api = recording()
    await StatusWriter(api, report_after=0).publish(outcome, cache)  # type: ignore[arg-type]
    [not_ready] = events(api, "NotReady")
    assert not_ready["message"] == "Job is not ready for scheduling. Waiting for 3 pods, currently 3 exist, 2 are gated"


async def test_a_pod_pipelined_to_another_node_each_cycle_gets_a_new_event_only_now_and_then() -> None:
    outcome, cache = scenario()
    api, clock = recording(), Clock()
    writer = StatusWriter(api, report_after=2, clock=clock)  # type: ignore[arg-type]
    pod = "team/runs-1"
    nodes = ["n1", "n2", "n1", "n2"]
    for node in nodes:  # each cycle pipelines it afresh, to another node
        outcome.decisions.pods[pod] = replace(outcome.decisions.pods[pod], node=node)
        await writer.publish(outcome, cache)
        clock.now += 1
    assert [e["message"] for e in events(api, "Pipelined")] == [f"Pod {pod} was pipelined to node n1"]
    clock.now += REPIPELINE_AFTER
    await writer.publish(outcome, cache)  # still on n2, half a minute later: now it is told
    assert [e["message"] for e in events(api, "Pipelined")][1:] == [f"Pod {pod} was pipelined to node n2"]
