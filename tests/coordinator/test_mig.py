"""MIG as a user of ``kai-ray schedule`` sees it: nodes that offer MIG instances by profile, pods
that ask for them by name, where they go, why they wait, and what they count against their queue
(an instance of ``<n>g`` is ``n`` GPUs, as KAI counts it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kai_ray.app.cli.schedule_cmd import decide
from kai_ray.io.config import load_config
from kai_ray.io.snapshot_loader import load_snapshot
from kai_ray.model import mig_gpus, profile_gpus
from tests.manifests import UNLIMITED_RESOURCES, Manifest, node, pod, pod_group, priority_class, queue, write

NOW = 1_700_000_000.0
MIXED = {"nvidia.com/mig.strategy": "mixed", "node-role.kubernetes.io/mig-enabled": "true"}


def gpu_quota(gpus: float) -> dict[str, Any]:
    return {**UNLIMITED_RESOURCES, "gpu": {"quota": gpus, "overQuotaWeight": 1, "limit": -1}}


def mig_node(name: str, instances: dict[str, int], labels: dict[str, str] | None = None, gpu: int = 0) -> Manifest:
    manifest = node(name, gpu=gpu, labels=labels)
    manifest["status"]["allocatable"].update({f"nvidia.com/mig-{p}": str(n) for p, n in instances.items()})
    return manifest


def mig_pod(name: str, queue_name: str, profile: str, count: int = 1, **kwargs: Any) -> Manifest:
    manifest = pod(name, queue_name, group=name, **kwargs)
    resources = manifest["spec"]["containers"][0]["resources"]
    resources["requests"][f"nvidia.com/mig-{profile}"] = str(count)
    resources["limits"] = {f"nvidia.com/mig-{profile}": str(count)}
    return manifest


def schedule(
    tmp_path: Path, objects: list[Manifest], actions: tuple[str, ...] = ("allocate",), config_text: str = ""
) -> dict[str, Any]:
    """``kai-ray schedule`` on these objects, each pod in a PodGroup of its own name."""
    groups = [
        pod_group(
            o["metadata"]["name"],
            o["metadata"]["labels"]["kai.scheduler/queue"],
            priority_class_name=o["spec"].get("priorityClassName"),
        )
        for o in objects
        if o["kind"] == "Pod"
    ]
    snapshot_file = write(tmp_path / "snapshot.yaml", objects + groups)
    config_file = tmp_path / "config.yaml"
    config_file.write_text("kValue: 0\n" + config_text)
    config = load_config(config_file)
    snapshot = load_snapshot(snapshot_file, config.schedulerName, config.migWorkerNodeLabelKey)
    result: dict[str, Any] = decide(snapshot, config, NOW, list(actions)).to_json()
    result["warnings"] = snapshot.report.warnings
    return result


def test_a_profile_counts_its_compute_slices_as_gpus() -> None:
    assert profile_gpus("nvidia.com/mig-1g.5gb") == 1
    assert profile_gpus("nvidia.com/mig-3g.20gb") == 3
    assert profile_gpus("nvidia.com/mig-7g.80gb") == 7
    assert profile_gpus("nvidia.com/mig-1c.3g.20gb") is None  # not of KAI's form: no GPUs
    assert mig_gpus({"nvidia.com/mig-1g.5gb": 2, "nvidia.com/mig-3g.20gb": 1, "example.com/fpga": 4}) == 5


def test_a_mig_pod_binds_where_its_profile_is_free_and_holds_its_profiles_gpus_of_the_queue(tmp_path: Path) -> None:
    out = schedule(
        tmp_path,
        [
            queue("q", resources=gpu_quota(8)),
            mig_node("a100-0", {"1g.5gb": 7}, MIXED),
            mig_node("a100-1", {"3g.20gb": 2}, MIXED),
            mig_pod("big", "q", "3g.20gb", 2),
            mig_pod("small", "q", "1g.5gb"),
        ],
    )
    assert out["pods"]["team/big"]["status"] == "Binding" and out["pods"]["team/big"]["node"] == "a100-1"
    assert out["pods"]["team/small"]["node"] == "a100-0"
    # Two 3g instances and one 1g held: 7 GPUs of the queue, which the 13 GPUs of the nodes'
    # instances give it in full as its fair share (it asks no more).
    assert out["queues"]["q"]["allocated"]["gpu"] == 7
    assert out["queues"]["q"]["fairShare"]["gpu"] == 7


def test_a_pod_waits_naming_the_profile_no_node_has_free(tmp_path: Path) -> None:
    out = schedule(
        tmp_path,
        [
            queue("q"),
            mig_node("a100-0", {"1g.5gb": 1}, MIXED),
            mig_pod("running", "q", "1g.5gb", node_name="a100-0", phase="Running"),
            mig_pod("waiting", "q", "1g.5gb"),
        ],
    )
    reason = out["pods"]["team/waiting"]["reason"]
    assert out["pods"]["team/waiting"]["status"] == "Pending"
    assert "1 node(s) didn't have enough of mig profile: nvidia.com/mig-1g.5gb" in reason


def test_mig_strategies_keep_each_kind_of_gpu_request_to_its_nodes(tmp_path: Path) -> None:
    single = {"nvidia.com/mig.strategy": "single", "node-role.kubernetes.io/mig-enabled": "true"}
    out = schedule(
        tmp_path,
        [
            queue("q"),
            node("plain", gpu=0),
            mig_node("mixed", {"1g.5gb": 1}, MIXED, gpu=4),
            node("single", gpu=4, labels=single),
            pod("whole", "q", gpu=1, group="whole"),
            pod("fraction", "q", group="fraction", annotations={"gpu-fraction": "0.5"}),
            mig_pod("sliced", "q", "1g.5gb"),
        ],
    )
    pods = out["pods"]
    assert pods["team/whole"]["node"] == "single"  # the mixed node refuses whole GPUs
    assert pods["team/sliced"]["node"] == "mixed"
    assert pods["team/fraction"]["status"] == "Pending"  # neither MIG node takes a fraction
    reason = pods["team/fraction"]["reason"]
    assert "1 non MIG jobs cant run on a node with MigStrategy='mixed'" in reason
    assert "1 only whole gpu jobs can run on a node with MigStrategy='single'" in reason


def test_a_mig_pod_never_goes_to_a_node_without_mig(tmp_path: Path) -> None:
    out = schedule(tmp_path, [queue("q"), node("gpu-node", gpu=8), mig_pod("sliced", "q", "1g.5gb")])
    assert out["pods"]["team/sliced"]["status"] == "Pending"
    assert "1 MIG job cannot be scheduled on non-MIG node" in out["pods"]["team/sliced"]["reason"]


def test_a_cpu_pod_prefers_a_cpu_node_to_a_mig_node(tmp_path: Path) -> None:
    out = schedule(
        tmp_path, [queue("q"), mig_node("a-mig", {"1g.5gb": 7}), node("b-cpu", gpu=0), pod("web", "q", group="web")]
    )
    assert out["pods"]["team/web"]["node"] == "b-cpu"


def test_reclaim_frees_mig_instances_counted_as_gpus(tmp_path: Path) -> None:
    """Two 3g.20gb instances are 6 GPUs of the cluster; each queue deserves 3. The queue running
    both (6 GPUs, over its share) gives one up to the queue that asks for one (3 GPUs, its share)."""
    deserves_three = gpu_quota(3)
    out = schedule(
        tmp_path,
        [
            priority_class("train", 50),
            queue("greedy", resources=deserves_three),
            queue("owed", resources=deserves_three),
            mig_node("a100", {"3g.20gb": 2}, MIXED),
            mig_pod("hog-0", "greedy", "3g.20gb", node_name="a100", phase="Running", priority_class_name="train"),
            mig_pod("hog-1", "greedy", "3g.20gb", node_name="a100", phase="Running", priority_class_name="train"),
            mig_pod("claim", "owed", "3g.20gb", priority_class_name="train"),
        ],
        actions=("reclaim",),
    )
    pods = out["pods"]
    assert [pods[f"team/hog-{i}"]["status"] for i in range(2)].count("Releasing") == 1
    assert pods["team/claim"]["status"] == "Pipelined" and pods["team/claim"]["node"] == "a100"


LEGACY_REASON = (
    "no nodes with enough resources were found: 2 node(s) refused it: Legacy MIG jobs cannot be scheduled "
    "(the pod asks for MIG in an annotation; ask for the profile in its resources instead)."
)


def legacy_pod(name: str, queue_name: str, profile: str, **kwargs: Any) -> Manifest:
    """A pod asking for MIG the old way: the profile named in an annotation."""
    return pod(name, queue_name, group=name, annotations={f"nvidia.com/mig-{profile}": "1"}, **kwargs)


def test_a_legacy_mig_pod_stays_pending_with_a_reason_and_other_pods_schedule(tmp_path: Path) -> None:
    out = schedule(
        tmp_path,
        [
            queue("q", resources=gpu_quota(8)),
            mig_node("a100-0", {"1g.5gb": 7, "3g.20gb": 1}, MIXED),
            node("cpu-0", gpu=0),
            legacy_pod("old", "q", "3g.20gb"),
            mig_pod("new", "q", "1g.5gb"),
            pod("web", "q", group="web"),
        ],
    )
    pods = out["pods"]
    assert pods["team/old"]["status"] == "Pending" and pods["team/old"]["node"] is None
    assert pods["team/old"]["reason"].endswith(LEGACY_REASON) and "\n" not in pods["team/old"]["reason"]
    assert pods["team/new"]["node"] == "a100-0" and pods["team/web"]["node"] == "cpu-0"
    # KAI counts the pod as asking for the annotation's instance: 3 GPUs the queue asks for.
    assert out["queues"]["q"]["fairShare"]["gpu"] == 4
    [warning] = out["warnings"]
    assert "team/old" in warning and "legacy MIG pod" in warning and "never schedules" in warning


def test_no_victim_is_evicted_for_a_legacy_mig_pod(tmp_path: Path) -> None:
    """As ``test_reclaim_frees_mig_instances_counted_as_gpus``, but the pod owed its share also
    names its profile in an annotation: no node would take it, so reclaim frees nothing."""
    deserves_three = gpu_quota(3)
    claim = mig_pod("claim", "owed", "3g.20gb", priority_class_name="train")
    claim["metadata"]["annotations"] = {"nvidia.com/mig-3g.20gb": "1"}
    out = schedule(
        tmp_path,
        [
            priority_class("train", 50),
            queue("greedy", resources=deserves_three),
            queue("owed", resources=deserves_three),
            mig_node("a100", {"3g.20gb": 2}, MIXED),
            mig_node("a100-spare", {"1g.5gb": 1}, MIXED),
            mig_pod("hog-0", "greedy", "3g.20gb", node_name="a100", phase="Running", priority_class_name="train"),
            mig_pod("hog-1", "greedy", "3g.20gb", node_name="a100", phase="Running", priority_class_name="train"),
            claim,
        ],
        actions=("reclaim",),
    )
    pods = out["pods"]
    assert [pods[f"team/hog-{i}"]["status"] for i in range(2)] == ["Running", "Running"]
    assert pods["team/claim"]["status"] == "Pending"


def test_a_running_legacy_mig_pod_holds_its_annotations_instance(tmp_path: Path) -> None:
    out = schedule(
        tmp_path,
        [
            queue("q"),
            mig_node("a100", {"1g.5gb": 1}, MIXED),
            legacy_pod("old", "q", "1g.5gb", node_name="a100", phase="Running"),
            mig_pod("new", "q", "1g.5gb"),
        ],
    )
    assert out["pods"]["team/new"]["status"] == "Pending"
    assert "1 node(s) didn't have enough of mig profile: nvidia.com/mig-1g.5gb" in out["pods"]["team/new"]["reason"]
    assert any("keeps MIG pods off the node it runs on, kai-ray does not" in w for w in out["warnings"])


def test_the_configured_label_key_marks_mig_nodes(tmp_path: Path) -> None:
    """With ``migWorkerNodeLabelKey`` set, that label decides and KAI's default one means nothing."""
    objects = [
        queue("q"),
        node("a-labelled", gpu=4, labels={"example.com/mig": "true", "nvidia.com/mig.strategy": "mixed"}),
        node("b-default-label", gpu=4, labels={"node-role.kubernetes.io/mig-enabled": "false"}),
        pod("whole", "q", gpu=1, group="whole"),
    ]
    default = schedule(tmp_path, objects)
    assert default["pods"]["team/whole"]["node"] == "a-labelled"  # the strategy alone makes no MIG node
    configured = schedule(tmp_path, objects, config_text="migWorkerNodeLabelKey: example.com/mig\n")
    assert configured["pods"]["team/whole"]["node"] == "b-default-label"


def test_a_profile_listed_at_zero_makes_a_mig_node_as_in_kai_v0_12(tmp_path: Path) -> None:
    """No MIG-node label, ``nvidia.com/mig-1g.5gb: 0`` listed: KAI v0.12 keeps the listed name and
    counts the node as offering MIG, so its mixed strategy turns a whole-GPU pod away."""
    out = schedule(
        tmp_path,
        [
            queue("q"),
            mig_node("stale", {"1g.5gb": 0}, {"nvidia.com/mig.strategy": "mixed"}, gpu=8),
            pod("whole", "q", gpu=1, group="whole"),
        ],
    )
    assert out["pods"]["team/whole"]["status"] == "Pending"
    assert "1 non MIG jobs cant run on a node with MigStrategy='mixed'" in out["pods"]["team/whole"]["reason"]
