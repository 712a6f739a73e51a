"""The synthetic cluster and workload: realistic shapes, all from the seed."""

from __future__ import annotations

from collections import Counter

import pytest

from kai_ray.app.sim.cluster import model_nodes, pool_of, synthetic_nodes
from kai_ray.app.sim.workload import generate
from kai_ray.io.fields import ObjectReader
from kai_ray.io.parse_core import parse_node


def test_model_nodes_are_the_kwok_manifests_as_the_scheduler_reads_them() -> None:
    manifests, nodes = synthetic_nodes(30, taint=True, prefix="n"), model_nodes(30, taint=True, prefix="n")
    assert [parse_node(ObjectReader(m, i)) for i, m in enumerate(manifests)] == nodes
    assert Counter(pool_of(n) for n in nodes) == {"gpu-8x80gb": 15, "gpu-4x40gb": 9, "cpu": 6}
    assert all(t.key == "kwok.x-k8s.io/node" for n in nodes for t in n.taints)
    assert {n.labels["topology.kubernetes.io/zone"] for n in nodes} == {"zone-a", "zone-b", "zone-c"}


def test_the_job_mix_covers_every_kind_and_stays_within_the_cluster() -> None:
    workload = generate(total_gpus=1000, jobs=800, seed=4, arrival_window=3600)
    kinds = Counter(job.kind for job in workload.jobs)
    assert set(kinds) == {"training", "gpu", "multi-gpu", "fraction", "cpu"}
    assert {job.fraction for job in workload.jobs if job.kind == "fraction"} == {0.25, 0.5}
    assert {job.priority_class for job in workload.jobs} == {"train", "build-preemptible", "build", "inference"}
    gangs = [job for job in workload.jobs if job.kind == "training"]
    assert any(job.min_member < job.pods for job in gangs), "some training jobs are elastic"
    assert all(job.pods * job.gpus <= 100 or job.pods == 2 for job in gangs)
    arrivals = [job.arrival for job in workload.jobs]
    assert arrivals == sorted(arrivals) and 0 < arrivals[-1] < 2 * 3600
    assert all(job.duration > 0 for job in workload.jobs)


def test_the_queue_tree_shares_most_gpus_as_quota_among_teams() -> None:
    workload = generate(total_gpus=1000, jobs=10, seed=1, arrival_window=3600)
    departments = [q for q in workload.queues if q.parent is None]
    teams = [q for q in workload.queues if q.parent is not None]
    assert len(departments) == 3 and len(teams) == 6
    assert sum(q.gpu.quota for q in departments) <= 900
    for department in departments:
        assert sum(q.gpu.quota for q in teams if q.parent == department.name) <= department.gpu.quota
    assert any(q.gpu.limit != -1 for q in teams) and {q.gpu.over_quota_weight for q in teams} == {1.0, 2.0}
    assert set(workload.leaf_queues) == {q.name for q in teams}


def test_the_same_seed_gives_the_same_workload() -> None:
    assert generate(500, 9, jobs=100, arrival_window=3600) == generate(500, 9, jobs=100, arrival_window=3600)
    assert generate(500, 9, jobs=100, arrival_window=3600) != generate(500, 10, jobs=100, arrival_window=3600)


def test_without_a_window_the_jobs_arrive_at_the_offered_load_asked_for() -> None:
    from kai_ray.app.sim.workload import offered_load

    for load in (0.5, 1.0, 2.0):
        workload = generate(total_gpus=800, jobs=300, seed=3, load=load)
        assert offered_load(workload, 800) == pytest.approx(load)
        sized = generate(total_gpus=800, seed=3, arrival_window=4 * 3600, load=load)
        assert sized.jobs[-1].arrival == pytest.approx(4 * 3600)
        assert offered_load(sized, 800) == pytest.approx(load, rel=0.2)  # the last job overshoots a little
