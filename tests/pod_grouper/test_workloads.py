"""KAI's pod-grouper rules per workload kind (pod_grouper/workloads.py), on the owner objects a user
writes: gang sizes, sub-groups, segments and topology constraints."""

from __future__ import annotations

from typing import Any

import pytest

from kai_ray.model import SubGroup, TopologyConstraint
from pod_grouper.workloads import WorkloadError, workload_group

Obj = dict[str, Any]


def owner(kind_spec: Obj, annotations: Obj | None = None, name: str = "job") -> Obj:
    return {"metadata": {"name": name, "uid": f"uid-{name}", "annotations": annotations or {}}, "spec": kind_spec}


def pod(labels: Obj | None = None, annotations: Obj | None = None) -> Obj:
    return {"metadata": {"name": "p", "labels": labels or {}, "annotations": annotations or {}}}


def replicas(**counts: int) -> Obj:
    return {name: {"replicas": n} for name, n in counts.items()}


def test_a_pytorch_elastic_job_is_sized_by_min_replicas_not_its_replica_count() -> None:
    job = owner({"pytorchReplicaSpecs": replicas(Master=1, Worker=7), "elasticPolicy": {"minReplicas": 3}})
    group = workload_group("PyTorchJob", job, pod({"training.kubeflow.org/replica-type": "worker"}))
    assert group.min_member == 3
    assert group.sub_groups == (SubGroup("master", 1), SubGroup("worker", 2))
    assert group.subgroup == "worker"


def test_scheduling_policy_min_available_wins_over_min_replicas() -> None:
    spec = {
        "pytorchReplicaSpecs": replicas(Master=1, Worker=7),
        "elasticPolicy": {"minReplicas": 3},
        "runPolicy": {"schedulingPolicy": {"minAvailable": 5}},
    }
    group = workload_group("PyTorchJob", owner(spec), pod({"training.kubeflow.org/replica-type": "master"}))
    assert group.min_member == 5 and group.subgroup == "master"


@pytest.mark.parametrize(
    ("kind", "spec", "expected"),
    [
        ("TFJob", {"tfReplicaSpecs": replicas(Chief=1, PS=2, Worker=4)}, 7),
        ("XGBoostJob", {"xgbReplicaSpecs": replicas(Master=1, Worker=3)}, 4),
        ("JAXJob", {"jaxReplicaSpecs": replicas(Worker=6)}, 6),
        ("MPIJob", {"mpiReplicaSpecs": replicas(Launcher=1, Worker=2)}, 3),
        ("TFJob", {"tfReplicaSpecs": replicas(Worker=4), "runPolicy": {"schedulingPolicy": {"minAvailable": 2}}}, 2),
        ("JAXJob", {"jaxReplicaSpecs": {"Worker": {}}}, 1),  # replicas defaults to 1
    ],
)
def test_kubeflow_jobs_need_every_replica_unless_min_available_says_less(kind: str, spec: Obj, expected: int) -> None:
    assert workload_group(kind, owner(spec), pod()).min_member == expected


def test_a_replica_type_with_no_replicas_is_refused_as_kai_does() -> None:
    with pytest.raises(WorkloadError, match="replicas"):
        workload_group("TFJob", owner({"tfReplicaSpecs": replicas(Worker=0)}), pod())


def test_a_batch_job_is_one_pod_unless_batch_min_member_is_set() -> None:
    assert workload_group("Job", owner({"parallelism": 4}), pod()).min_member == 1
    gang = owner({"parallelism": 4}, {"kai.scheduler/batch-min-member": "4"})
    assert workload_group("Job", gang, pod()).min_member == 4


def test_a_notebook_is_build_work_of_one_pod() -> None:
    group = workload_group("Notebook", owner({}), pod())
    assert (group.min_member, group.priority_class) == (1, "build")


def test_a_spark_application_is_one_group_named_after_its_selector() -> None:
    driver = pod({"spark-app-name": "etl", "spark-app-selector": "spark-0042"})
    group = workload_group("Pod", driver, driver)
    assert (group.name, group.min_member) == ("spark-0042", 1)


def test_a_knative_revision_is_a_gang_of_its_min_scale() -> None:
    revision = {
        "metadata": {"name": "svc-00001", "uid": "rev-uid", "annotations": {"autoscaling.knative.dev/min-scale": "3"}}
    }
    group = workload_group("Service", owner({}), pod({"serving.knative.dev/revision": "svc-00001"}), revision)
    assert (group.name, group.min_member, group.priority_class) == ("pg-svc-00001-rev-uid", 3, "inference")
    unset = {"metadata": {"name": "svc-00002", "uid": "u2", "annotations": {}}}
    assert workload_group("Service", owner({}), pod(), unset).min_member == 1


def test_the_top_owners_topology_annotations_become_the_pod_groups_constraint() -> None:
    notes = {
        "kai.scheduler/topology": "cluster-topology",
        "kai.scheduler/topology-required-placement": "zone",
        "kai.scheduler/topology-preferred-placement": "rack",
    }
    group = workload_group("Job", owner({}, notes), pod())
    assert group.topology == TopologyConstraint("cluster-topology", "zone", "rack")
    assert (
        workload_group("Job", owner({}, {"kai.scheduler/topology-required-placement": "zone"}), pod()).topology is None
    )


def segmented(workers: int, size: str, minimum: int | None = None, **worker_notes: str) -> Obj:
    template = {"metadata": {"annotations": {"kai.scheduler/segment-size": size, **worker_notes}}}
    spec: Obj = {
        "pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": workers, "template": template}}
    }
    if minimum is not None:
        spec["runPolicy"] = {"schedulingPolicy": {"minAvailable": minimum}}
    return owner(spec, {"kai.scheduler/topology": "cluster-topology"})


def worker(index: int) -> Obj:
    return pod({"training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": str(index)})


def test_segments_split_the_workers_and_carry_the_segment_constraint() -> None:
    job = segmented(16, "4", **{"kai.scheduler/segment-topology-required-placement": "rack"})
    group = workload_group("PyTorchJob", job, worker(9))
    rack = TopologyConstraint("cluster-topology", "rack")
    assert group.sub_groups == (
        SubGroup("master", 1),
        SubGroup("worker", 0, min_sub_group=4),
        *(SubGroup(f"worker-{i}", 4, parent="worker", topology=rack) for i in range(4)),
    )
    assert group.subgroup == "worker-2"  # index 9 // 4


def test_segments_beyond_the_minimum_are_elastic_and_the_last_one_may_be_short() -> None:
    """segments.md: MinMember 12 of 20 workers in segments of 4 -> segments 0-2 required, 3-4 elastic;
    10 workers of which all required in segments of 4 -> the last segment holds 2."""
    job = segmented(20, "4", minimum=13, **{"kai.scheduler/segment-topology-preferred-placement": "rack"})
    minimums = [s.min_member for s in workload_group("PyTorchJob", job, worker(0)).sub_groups if s.parent]
    assert minimums == [4, 4, 4, 0, 0]
    short = segmented(10, "4", **{"kai.scheduler/segment-topology-required-placement": "rack"})
    assert [s.min_member for s in workload_group("PyTorchJob", short, worker(0)).sub_groups if s.parent] == [4, 4, 2]


def test_a_worker_without_its_replica_index_cannot_join_a_segment() -> None:
    job = segmented(8, "4", **{"kai.scheduler/segment-topology-required-placement": "rack"})
    with pytest.raises(WorkloadError, match="replica index"):
        workload_group("PyTorchJob", job, pod({"training.kubeflow.org/replica-type": "worker"}))


def lws(size: int, policy: Obj | None = None, startup: str | None = None, notes: Obj | None = None) -> Obj:
    template: Obj = {"size": size, "workerTemplate": {"metadata": {"annotations": notes or {}}}}
    if policy:
        template["subGroupPolicy"] = policy
    spec: Obj = {"replicas": 2, "leaderWorkerTemplate": template}
    if startup:
        spec["startupPolicy"] = startup
    return owner(spec, {"kai.scheduler/topology": "cluster-topology"}, name="lws")


def lws_pod(worker: int, group: int = 0, node: str | None = None) -> Obj:
    out = pod(
        {"leaderworkerset.sigs.k8s.io/worker-index": str(worker), "leaderworkerset.sigs.k8s.io/group-index": str(group)}
    )
    if node:
        out["spec"] = {"nodeName": node}
    return out


def test_a_leader_worker_set_is_one_gang_per_replica_group_with_leader_and_workers() -> None:
    group = workload_group("LeaderWorkerSet", lws(4), lws_pod(2, group=1))
    assert (group.name, group.min_member, group.subgroup) == ("pg-lws-uid-lws-group-1", 4, "workers")
    assert group.sub_groups == (SubGroup("leader", 1), SubGroup("workers", 3))
    assert workload_group("LeaderWorkerSet", lws(4), lws_pod(0)).subgroup == "leader"


def test_under_leader_ready_an_unscheduled_leader_goes_alone() -> None:
    assert workload_group("LeaderWorkerSet", lws(4, startup="LeaderReady"), lws_pod(0)).min_member == 1
    assert workload_group("LeaderWorkerSet", lws(4, startup="LeaderReady"), lws_pod(0, node="n1")).min_member == 4
    assert workload_group("LeaderWorkerSet", lws(4, startup="LeaderReady"), lws_pod(2)).min_member == 4


def test_leader_worker_set_segments_keep_the_leader_in_the_first_one() -> None:
    """segments.md's LeaderWorkerSet example: size 5 in segments of 2, LeaderWorker policy."""
    rack = {"kai.scheduler/segment-topology-required-placement": "rack"}
    group = workload_group("LeaderWorkerSet", lws(5, {"subGroupSize": 2}, notes=rack), lws_pod(3))
    constraint = TopologyConstraint("cluster-topology", "rack")
    assert group.sub_groups == (
        SubGroup("segment-0", 0, min_sub_group=2, topology=constraint),
        SubGroup("segment-1", 2, topology=constraint),
        SubGroup("leader", 1, parent="segment-0"),
        SubGroup("workers", 2, parent="segment-0"),
    )
    assert group.subgroup == "segment-1"
    assert workload_group("LeaderWorkerSet", lws(5, {"subGroupSize": 2}, notes=rack), lws_pod(1)).subgroup == "workers"


def test_leader_excluded_segments_put_the_leader_apart_and_need_whole_segments() -> None:
    policy = {"subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"}
    group = workload_group("LeaderWorkerSet", lws(5, policy), lws_pod(4))
    assert [(s.name, s.min_member) for s in group.sub_groups] == [("leader", 1), ("segment-0", 2), ("segment-1", 2)]
    assert group.subgroup == "segment-1"
    with pytest.raises(WorkloadError, match="divisible"):
        workload_group("LeaderWorkerSet", lws(6, policy), lws_pod(1))


def test_segment_annotations_where_kai_does_not_read_them_are_reported() -> None:
    template = {"metadata": {"annotations": {"kai.scheduler/segment-size": "4"}}}
    job = owner({"tfReplicaSpecs": {"Worker": {"replicas": 8, "template": template}}})
    group = workload_group("TFJob", job, pod())
    assert group.min_member == 8 and group.sub_groups == ()
    assert "kai.scheduler/segment-size on Worker is not read" in group.notes[0]
