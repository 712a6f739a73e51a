"""KAI's plugin list in a config: which are on and in which order changes decisions as in KAI.

Each case runs with KAI's defaults and with the plugin turned off or moved, and the two must
differ as the plugin's hooks say (so the test fails if the setting were ignored)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.jobs import Job
from coordinator.plugins.job_order import composed
from coordinator.scheduler import run_session
from coordinator.session_open import open_session
from kai_ray.errors import ConfigError
from kai_ray.io.config import config_from_mapping
from kai_ray.model import ClusterSnapshot
from tests.builders import JobSpec, build, config, node, queue

NOW = 1_000_000.0


def placed(snapshot: ClusterSnapshot, actions: list[str], **cfg: object) -> set[str]:
    """Jobs with a pod that the session placed (pods pending before, not pending after)."""
    before = {p.key for p in snapshot.pods if p.node is None}
    pods = run_session(snapshot, config(**cfg), NOW, actions).pods
    return {key.split("/")[1].rsplit("-", 1)[0] for key in before if pods[key].status != "Pending"}


def evicted(snapshot: ClusterSnapshot, actions: list[str], **cfg: object) -> set[str]:
    pods = run_session(snapshot, config(**cfg), NOW, actions).pods
    return {key.split("/")[1].rsplit("-", 1)[0] for key, p in pods.items() if p.status == "Releasing"}


def off(*names: str) -> dict[str, dict[str, object]]:
    return {name: {"enabled": False} for name in names}


# ----------------------------------------------------------------------------- job order
def one_gpu_for_two() -> ClusterSnapshot:
    """One free GPU. ``high`` (priority 80) runs one of its two pods, at its minimum of one;
    ``low`` (priority 50, created later) runs nothing. The priority plugin puts ``high`` first,
    the elastic plugin ``low`` (a job below its minimum goes before one at it)."""
    return build(
        [node("n", gpu=2)],
        [queue("q")],
        [
            JobSpec("high", "q", pods=2, min_member=1, priority=80, running_on=["n"], created=5),
            JobSpec("low", "q", priority=50, created=6),
        ],
    )


@pytest.mark.parametrize(
    ("plugins", "first"),
    [
        ({}, "high"),  # KAI's default order: priority, then elastic
        ({"elastic": {"priority": 1750}}, "low"),  # elastic asked before priority
        (off("priority"), "low"),
        (off("elastic"), "high"),
        (off("priority", "elastic"), "high"),  # the older job
    ],
)
def test_job_order_follows_the_enabled_order_plugins_in_their_order(plugins: dict[str, object], first: str) -> None:
    assert placed(one_gpu_for_two(), ["allocate"], plugins=plugins) == {first}


def test_turning_elastic_off_does_not_reorder_a_cluster_where_it_has_no_say() -> None:
    both_pending = build(
        [node("n", gpu=1)],
        [queue("q")],
        [JobSpec("old", "q", created=1), JobSpec("new", "q", priority=60, created=2)],
    )
    assert placed(both_pending, ["allocate"]) == placed(both_pending, ["allocate"], plugins=off("elastic")) == {"new"}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(1, 3), st.integers(0, 3), st.integers(0, 5)), min_size=1, max_size=6
    )
)
def test_the_default_order_written_out_is_the_composed_one(specs: list[tuple[int, int, int, int]]) -> None:
    """``Job.order_key``/``victim_key`` stand for the composition of KAI's default plugins."""
    jobs = [
        JobSpec(f"j{i}", "q", pods=pods, min_member=1, priority=prio * 30, running_on=["n"] * min(run, pods), created=c)
        for i, (prio, pods, run, c) in enumerate(specs)
    ]
    state = open_session(build([node("n", gpu=64)], [queue("q")], jobs), config(), NOW)
    keys = composed(("priority", "elastic"))
    for job in state.jobs.values():
        assert keys.order(job) == job.order_key()
        assert keys.victim(job) == job.victim_key()
    ordered = sorted(state.jobs.values(), key=Job.order_key)
    assert sorted(state.jobs.values(), key=keys.order) == ordered
    assert sorted(state.jobs.values(), key=keys.victim) == ordered[::-1]


# ----------------------------------------------------------------------------- node order
def where(snapshot: ClusterSnapshot, pod: str, **cfg: object) -> str | None:
    return run_session(snapshot, config(**cfg), NOW, ["allocate"]).pods[pod].node


def test_resourcetype_off_lets_a_cpu_pod_bin_pack_onto_a_gpu_node() -> None:
    """resourcetype sends CPU-only pods to nodes without GPUs; bin-packing alone prefers the node
    with the least CPU free, here the GPU node."""
    case = build(
        [node("gpu-node", gpu=8, cpu=8_000), node("cpu-node", gpu=0, cpu=64_000)],
        [queue("q")],
        [JobSpec("cpu-job", "q", gpu=0, cpu=1_000)],
    )
    assert where(case, "default/cpu-job-0") == "cpu-node"
    assert where(case, "default/cpu-job-0", plugins=off("resourcetype")) == "gpu-node"


# ----------------------------------------------------------------------------- minruntime
def young_hogs(reclaim_minimum: float, preempt_minimum: float, running_for: float) -> ClusterSnapshot:
    case = build(
        [node("n", gpu=2)],
        [replace(queue("a"), reclaim_min_runtime=reclaim_minimum, preempt_min_runtime=preempt_minimum), queue("b")],
        [
            JobSpec("hog1", "a", running_on=["n"], created=1),
            JobSpec("hog2", "a", running_on=["n"], created=2),
            JobSpec("wants", "b", created=10),
            JobSpec("urgent", "a", priority=90, created=11),
        ],
    )
    groups = tuple(replace(g, last_start=NOW - running_for) if g.name.startswith("hog") else g for g in case.pod_groups)
    return replace(case, pod_groups=groups)


def test_minruntime_off_lets_reclaim_take_a_job_inside_its_minimum_runtime() -> None:
    case = young_hogs(reclaim_minimum=600, preempt_minimum=0, running_for=60)
    assert evicted(case, ["reclaim"]) == set()
    assert evicted(case, ["reclaim"], plugins=off("minruntime")) == {"hog2"}


def test_minruntime_off_lets_preempt_take_a_job_inside_its_minimum_runtime() -> None:
    case = young_hogs(reclaim_minimum=0, preempt_minimum=600, running_for=60)
    assert evicted(case, ["preempt"]) == set()
    assert evicted(case, ["preempt"], plugins=off("minruntime")) == {"hog2"}


def test_a_reclaim_held_by_the_minimum_runtime_says_so() -> None:
    case = young_hogs(reclaim_minimum=600, preempt_minimum=0, running_for=60)
    pods = run_session(case, config(), NOW, ["reclaim"]).pods
    assert "within their reclaim minimum runtime" in (pods["default/wants-0"].reason or "")


# ----------------------------------------------------------------------------- the config
def test_an_unknown_plugin_is_a_one_line_error() -> None:
    with pytest.raises(ConfigError, match=r"plugins: unknown plugin 'binpacker'"):
        config_from_mapping({"plugins": {"binpacker": {"enabled": True}}})


def test_settings_kai_ray_cannot_honour_are_warned_about() -> None:
    resolved = config_from_mapping(
        {
            "plugins": {
                "proportion": {"enabled": False},
                "taskorder": {"priority": 5},
                "minruntime": {"arguments": {"defaultReclaimMinRuntime": "5m"}},
                "gpuspread": {"enabled": True},
                "elastic": {"enabled": False},  # honoured: no warning
            }
        }
    ).resolved_plugins
    warnings = "\n".join(resolved.warnings)
    assert "plugins.proportion is off" in warnings
    assert "plugins.taskorder.priority changes nothing" in warnings
    assert "plugins.minruntime.arguments are not read" in warnings
    assert "plugins.gpuspread.enabled is not read" in warnings
    assert "plugins.elastic" not in warnings
    assert resolved.job_order() == ("priority",)


def test_plugins_resolve_in_kai_operator_order() -> None:
    resolved = config_from_mapping({"plugins": {"elastic": {"priority": 1750}}}).resolved_plugins
    assert resolved.job_order() == ("elastic", "priority")
    assert resolved.names[:3] == ("predicates", "proportion", "elastic")
    assert config_from_mapping({}).resolved_plugins.warnings == ()
