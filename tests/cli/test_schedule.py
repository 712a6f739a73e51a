"""``kai-ray schedule``: the decision output (docs/architecture.md#decision-output), and cluster
states KAI tolerates (pending with a reason)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests import manifests as m
from tests.cli.conftest import CliResult, RunCli
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "cluster.yaml"
NOW = "2026-01-03T00:00:00Z"
STATUSES = {"Pending", "Binding", "Pipelined", "Running", "Releasing", "Failed", "Succeeded"}
GIB = 2**30


def schedule(kai_ray: RunCli, path: Path, *options: str) -> CliResult:
    result = kai_ray("schedule", "--snapshot", path, "--now", NOW, *options)
    assert result.code == 0, result.err
    return result


def decisions(kai_ray: RunCli, tmp_path: Path, objects: list[m.Manifest], *options: str) -> Any:
    return schedule(kai_ray, m.write(tmp_path / "snapshot.yaml", objects), *options).json()


# ------------------------------------------------------------------ output shape


def test_fair_shares_only_print_the_documented_json(kai_ray: RunCli) -> None:
    result = schedule(kai_ray, EXAMPLE, "--actions", "none", "-o", "json")
    out = result.json()
    assert set(out) == {"pods", "podGroups", "queues"}
    assert set(out["pods"]) == {
        "vision/vision-train-0",
        "vision/vision-train-1",
        "nlp/nlp-notebook",
        "nlp/nlp-big-train",
        "nlp/etl",
    }  # every pod of the snapshot
    for pod in out["pods"].values():
        assert pod["status"] in STATUSES and {"status", "node", "gpuGroups"} <= set(pod)
        assert pod["status"] != "Pending" or pod["reason"]  # a pending pod always says why
    assert all(pod["status"] == "Pending" for pod in out["pods"].values())  # no action ran
    assert set(out["queues"]) == {"research", "team-vision", "team-nlp"}
    for figures in out["queues"].values():
        assert set(figures) == {"fairShare", "allocated"}
        assert set(figures["fairShare"]) == set(figures["allocated"]) == {"gpu", "cpu", "memory"}
    research = out["queues"]["research"]["fairShare"]
    # gpu in devices (the 16 it deserves), cpu in millicores and memory in bytes (all it requests).
    assert research == {"gpu": 16, "cpu": 34_000, "memory": (2 * 64 + 16 + 128) * GIB}
    assert out["queues"]["team-nlp"]["fairShare"]["gpu"] == 8


def test_the_text_output_is_a_readable_table(kai_ray: RunCli) -> None:
    lines = schedule(kai_ray, EXAMPLE, "--actions", "none", "-o", "text").out.splitlines()
    assert lines[0].split() == ["pod", "status", "node", "gpu", "groups", "reason"]
    assert set(lines[1]) <= {"-", " "}
    etl = next(line for line in lines if line.startswith("nlp/etl "))
    assert "Pending" in etl and "QueueDoesNotExist" in etl and "missing-queue" in etl
    assert "5 Pending" in lines
    research = next(line for line in lines if line.startswith("research "))
    assert research.split()[:2] == ["research", "16"]
    assert "skipped kinds kai-ray does not use: 1 Service" in lines


def test_a_session_with_allocate_binds_and_explains_the_rest(kai_ray: RunCli) -> None:
    out = schedule(kai_ray, EXAMPLE, "--actions", "allocate").json()
    pods = out["pods"]
    assert {pods[f"vision/vision-train-{i}"]["status"] for i in (0, 1)} == {"Binding"}
    assert pods["nlp/nlp-notebook"]["status"] == "Binding" and len(pods["nlp/nlp-notebook"]["gpuGroups"]) == 1
    assert pods["nlp/nlp-big-train"]["status"] == "Pending"
    assert "OverLimit" in pods["nlp/nlp-big-train"]["reason"]
    assert out["queues"]["team-vision"]["allocated"] == {"gpu": 8, "cpu": 16_000, "memory": 128 * GIB}
    assert out["queues"]["research"]["allocated"]["gpu"] == 8.5  # the fraction counts, rolled up


def test_json_and_yaml_snapshots_give_the_same_decisions(kai_ray: RunCli, tmp_path: Path) -> None:
    objects = [m.node("n1", gpu=4), m.queue("q"), m.pod("a", "q", gpu=2), m.pod("b", "q", gpu=3)]
    as_yaml = schedule(kai_ray, m.write(tmp_path / "s.yaml", objects, "list"), "--actions", "allocate").out
    as_json = schedule(kai_ray, m.write(tmp_path / "s.json", objects, "json"), "--actions", "allocate").out
    assert as_yaml == as_json


# ------------------------------------------------------------------ tolerated cluster states


def test_a_pod_naming_a_missing_queue_waits_with_kais_reason(kai_ray: RunCli, tmp_path: Path) -> None:
    out = decisions(kai_ray, tmp_path, [m.node("n1"), m.queue("q"), m.pod("p", "nowhere")])
    pod = out["pods"]["team/p"]
    assert pod["status"] == "Pending" and pod["node"] is None
    assert "QueueDoesNotExist" in pod["reason"] and "nowhere" in pod["reason"]
    assert out["podGroups"]["team/pg-p"]["status"] == "Pending"


def test_an_orphan_queue_is_dropped_with_a_warning_and_its_pods_wait(kai_ray: RunCli, tmp_path: Path) -> None:
    path = m.write(
        tmp_path / "snapshot.yaml",
        [
            m.node("n1"),
            m.queue("root"),
            m.queue("team", parent="root"),
            m.queue("orphan", parent="gone"),
            m.pod("p", "orphan"),
        ],
    )
    result = schedule(kai_ray, path)
    assert "kai-ray: warning: Queue orphan: dropped, its parent queue 'gone' does not exist" in result.err
    assert "Traceback" not in result.err
    out = result.json()
    assert set(out["queues"]) == {"root", "team"}
    reason = out["pods"]["team/p"]["reason"]  # the queue exists: saying it does not would send users astray
    assert "QueueDoesNotExist" not in reason
    assert reason.startswith("queue orphan is not usable: its parent queue 'gone' does not exist")


def test_a_pod_naming_a_missing_pod_group_waits_and_says_so(kai_ray: RunCli, tmp_path: Path) -> None:
    out = decisions(kai_ray, tmp_path, [m.node("n1"), m.queue("q"), m.pod("p", "q", group="ghost")])
    pod = out["pods"]["team/p"]
    assert pod["status"] == "Pending" and "PodGroup team/ghost does not exist" in pod["reason"]


def test_a_pod_too_big_for_every_node_waits_with_a_readable_reason(kai_ray: RunCli, tmp_path: Path) -> None:
    out = decisions(kai_ray, tmp_path, [m.node("n1", gpu=8), m.queue("q"), m.pod("huge", "q", gpu=12)])
    reason = out["pods"]["team/huge"]["reason"]
    assert out["pods"]["team/huge"]["status"] == "Pending"
    assert reason.startswith(
        "Resources were not found for pod team/huge due to: no nodes with enough resources were found: "
        "1 node(s) didn't have enough resources: GPUs. Max GPU resources available in a single node is topped at 8"
    )


def test_pods_of_other_schedulers_hold_capacity_and_shrink_the_fair_share(kai_ray: RunCli, tmp_path: Path) -> None:
    objects = [
        m.node("n1", gpu=8),
        m.queue("q"),
        m.pod("web", namespace="other", gpu=6, scheduler="default-scheduler", node_name="n1", phase="Running"),
        m.pod("four", "q", gpu=4),
        m.pod("two", "q", gpu=2),
    ]
    out = decisions(kai_ray, tmp_path, objects)
    assert out["pods"]["other/web"]["status"] == "Running"  # reported, never touched
    assert out["pods"]["team/two"]["status"] == "Binding"
    four = out["pods"]["team/four"]
    assert four["status"] == "Pending" and "1 node(s) didn't have enough resources: GPUs" in four["reason"]
    fair_only = decisions(kai_ray, tmp_path, objects, "--actions", "none")
    assert fair_only["queues"]["q"]["fairShare"]["gpu"] == 2  # 8 on the node, 6 taken by another scheduler


def test_a_pod_without_a_queue_label_runs_in_the_default_queue(kai_ray: RunCli, tmp_path: Path) -> None:
    objects = [
        m.node("n1"),
        m.queue("default-parent-queue"),
        m.queue("default-queue", parent="default-parent-queue"),
        m.pod("unlabelled", gpu=1),
    ]
    out = decisions(kai_ray, tmp_path, objects)
    assert out["pods"]["team/unlabelled"]["status"] == "Binding"
    assert out["queues"]["default-queue"]["allocated"]["gpu"] == 1
    assert out["queues"]["default-parent-queue"]["allocated"]["gpu"] == 1


def test_without_default_queues_an_unlabelled_pod_waits_for_the_default_queue(kai_ray: RunCli, tmp_path: Path) -> None:
    out = decisions(kai_ray, tmp_path, [m.node("n1"), m.queue("q"), m.pod("unlabelled")])
    assert "QueueDoesNotExist: queue default-queue does not exist" in out["pods"]["team/unlabelled"]["reason"]


def test_a_kubectl_get_all_dump_is_scheduled_and_the_skipped_kinds_are_reported(
    kai_ray: RunCli,
    tmp_path: Path,
) -> None:
    dump = [
        m.node("n1"),
        m.queue("q"),
        m.pod("job", "q", gpu=1),
        m.pod("web-1", namespace="shop", scheduler="default-scheduler", node_name="n1", phase="Running"),
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"}},
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-1", "namespace": "shop"}},
        {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly", "namespace": "shop"}},
    ]
    path = m.write(tmp_path / "all.yaml", dump, "list")
    text = schedule(kai_ray, path, "-o", "text").out
    assert "skipped kinds kai-ray does not use: 1 CronJob, 1 Deployment, 1 ReplicaSet, 1 Service" in text
    out = schedule(kai_ray, path, "-o", "json").json()
    assert out["pods"]["team/job"]["status"] == "Binding"
    assert set(out["pods"]) == {"team/job", "shop/web-1"}


# ------------------------------------------------------------------ units and defaults seen in the output


def test_queue_memory_is_reported_in_bytes(kai_ray: RunCli, tmp_path: Path) -> None:
    memory_in_millions = {"quota": 1000, "overQuotaWeight": 0, "limit": 1500}
    resources = {"gpu": {"quota": -1, "limit": -1}, "cpu": {"quota": -1, "limit": -1}, "memory": memory_in_millions}
    objects = [
        m.node("n1"),
        m.queue("q", resources=resources),
        m.pod("p", "q", memory="512Mi"),
        m.pod("pending", "q", memory="2Gi"),
    ]
    out = decisions(kai_ray, tmp_path, objects, "--actions", "allocate")
    figures = out["queues"]["q"]
    assert figures["fairShare"]["memory"] == 1_000_000_000  # quota 1000 x 10^6 bytes, weight 0
    assert figures["allocated"]["memory"] == 512 * 2**20
    assert "OverLimit" in out["pods"]["team/pending"]["reason"]  # 512Mi + 2Gi > 1.5 GB


def test_a_non_preemptible_job_may_not_go_over_quota(kai_ray: RunCli, tmp_path: Path) -> None:
    resources = {
        "gpu": {"quota": 2, "overQuotaWeight": 1, "limit": -1},
        "cpu": {"quota": -1, "limit": -1},
        "memory": {"quota": -1, "limit": -1},
    }
    objects = [
        m.node("n1"),
        m.queue("q", resources=resources),
        m.priority_class("inference", 125),
        m.priority_class("train", 50),
        m.pod_group("serve", "q", priority_class_name="inference"),
        m.pod("serve-0", group="serve", gpu=3),
        m.pod_group("train", "q", priority_class_name="train"),
        m.pod("train-0", group="train", gpu=3),
    ]
    out = decisions(kai_ray, tmp_path, objects, "--actions", "allocate")
    assert "NonPreemptibleOverQuota" in out["pods"]["team/serve-0"]["reason"]
    assert out["pods"]["team/train-0"]["status"] == "Binding"  # preemptible: over quota is fine


def test_ray_shard_actors_decide_exactly_what_one_shard_in_process_decides(
    kai_ray: RunCli, ray_session: None, tmp_path: Path
) -> None:
    path = EXAMPLE
    in_process = schedule(kai_ray, path, "--shards", "1").json()
    on_actors = schedule(kai_ray, path, "--ray-shards", "2").json()
    assert on_actors == in_process
    assert any(p["status"] == "Binding" for p in in_process["pods"].values())  # something was placed


def test_ray_shards_needs_at_least_one_actor(kai_ray: RunCli) -> None:
    result = kai_ray("schedule", "--snapshot", EXAMPLE, "--now", NOW, "--ray-shards", "0")
    assert result.code == 2 and "--ray-shards" in result.err
