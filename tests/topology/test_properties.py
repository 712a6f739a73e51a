"""Topology invariants on random clusters (Hypothesis), through the readers and the session
``kai-ray schedule`` runs, on one shard or several:

- a bound gang (and every sub-group with its own constraint) never spans two domains of its
  required level, and never uses a node that lacks one of the topology's labels;
- when one domain of the preferred level can hold a gang, the gang lands in one such domain;
- a gang that some required-level domain could hold is not left pending (no valid placement
  missed).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.topology.cluster import TOPOLOGY, Job, Pod, decide_docs, documents

ZONE, RACK, HOST = "t/zone", "t/rack", "t/host"
LEVELS = (ZONE, RACK, HOST)


@dataclass(frozen=True)
class Cluster:
    nodes: dict[str, tuple[int, dict[str, str]]]
    free: dict[str, int]  # GPUs free on each node once the running pods are in
    jobs: list[Job]
    gangs: list[tuple[str, int, int, str, str]]  # name, pods, gpus per pod, required, preferred


@st.composite
def clusters(draw: st.DrawFn, with_subgroups: bool = False) -> Cluster:
    nodes: dict[str, tuple[int, dict[str, str]]] = {}
    free: dict[str, int] = {}
    running: list[Pod] = []
    for i in range(draw(st.integers(3, 14))):
        name = f"n{i:02d}"
        gpus = draw(st.integers(1, 6))
        labels = {ZONE: f"z{draw(st.integers(0, 1))}", RACK: f"r{draw(st.integers(0, 3))}", HOST: name}
        if draw(st.integers(0, 9)) == 0:  # now and then a node without one of the labels
            labels.pop(draw(st.sampled_from(LEVELS)))
        nodes[name] = (gpus, labels)
        used = draw(st.integers(0, gpus))
        running.extend(Pod(node=name) for _ in range(used))
        free[name] = gpus - used
    jobs = [Job("busy", 1, tuple(running), {"minMember": 1})] if running else []
    gangs = []
    for g in range(draw(st.integers(1, 3))):
        required = draw(st.sampled_from(["", ZONE, RACK]))
        deeper = [lv for lv in LEVELS if not required or LEVELS.index(lv) >= LEVELS.index(required)]
        preferred = draw(st.sampled_from(["", *deeper]))
        if not required and not preferred:
            required = RACK
        pods, gpus = draw(st.integers(1, 5)), draw(st.integers(1, 3))
        name = f"gang{g}"
        gangs.append((name, pods, gpus, required, preferred))
        constraint = {"topology": TOPOLOGY}
        if required:
            constraint["requiredTopologyLevel"] = required
        if preferred:
            constraint["preferredTopologyLevel"] = preferred
        if with_subgroups and pods >= 2:
            half = pods // 2
            spec = {
                "topologyConstraint": {"topology": TOPOLOGY, "requiredTopologyLevel": ZONE},
                "subGroups": [
                    {"name": "a", "minMember": half, "topologyConstraint": constraint},
                    {"name": "b", "minMember": pods - half, "topologyConstraint": constraint},
                ],
            }
            members = tuple(Pod(subgroup="a" if i < half else "b") for i in range(pods))
            jobs.append(Job(name, gpus, members, spec))
        else:
            jobs.append(Job(name, gpus, tuple(Pod() for _ in range(pods)), {"topologyConstraint": constraint}))
    return Cluster(nodes, free, jobs, gangs)


def _domain(labels: dict[str, str], level: str) -> tuple[str, ...] | None:
    """The node's domain at ``level`` (its label path), None if it lacks any topology label."""
    if any(lv not in labels for lv in LEVELS):
        return None
    return tuple(labels[lv] for lv in LEVELS[: LEVELS.index(level) + 1])


def _placements(cluster: Cluster, shards: int) -> tuple[dict[str, list[tuple[str, str | None]]], dict[str, str]]:
    decisions = decide_docs(documents(LEVELS, cluster.nodes, cluster.jobs), shards=shards)
    by_job: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
    for key, pod in decisions.pods.items():
        name = key.split("/", 1)[1]
        if name.startswith("gang"):
            by_job[name.rsplit("-", 1)[0]].append((pod.status, pod.node))
    reasons = {k.split("/", 1)[1]: v.reason for k, v in decisions.pod_groups.items()}
    return by_job, reasons


def _rooms(cluster: Cluster, level: str, gpus: int) -> dict[tuple[str, ...], int]:
    """How many pods of ``gpus`` each domain of ``level`` could take (whole nodes' free GPUs)."""
    rooms: dict[tuple[str, ...], int] = defaultdict(int)
    for name, (_, labels) in cluster.nodes.items():
        domain = _domain(labels, level)
        if domain is not None:
            rooms[domain] += cluster.free[name] // gpus
    return rooms


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.sampled_from([1, 3]))
def test_required_levels_are_never_crossed_and_unlabelled_nodes_never_used(cluster: Cluster, shards: int) -> None:
    by_job, _ = _placements(cluster, shards)
    for name, _pods, _gpus, required, _preferred in cluster.gangs:
        nodes = [node for status, node in by_job[name] if status == "Binding"]
        for node in nodes:
            assert _domain(cluster.nodes[node][1], HOST) is not None, f"{name} uses {node}, which lacks a level"
        if required and nodes:
            assert len({_domain(cluster.nodes[n][1], required) for n in nodes}) == 1, (name, required, nodes)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(with_subgroups=True))
def test_sub_groups_keep_their_own_required_level_inside_the_job_level(cluster: Cluster) -> None:
    decisions = decide_docs(documents(LEVELS, cluster.nodes, cluster.jobs))
    pods = {k.split("/", 1)[1]: v for k, v in decisions.pods.items()}
    for job in cluster.jobs:
        if not job.name.startswith("gang") or "subGroups" not in job.spec:
            continue
        required = job.spec["subGroups"][0]["topologyConstraint"].get("requiredTopologyLevel")
        placed = {i: pods[f"{job.name}-{i}"].node for i, _ in enumerate(job.pods) if pods[f"{job.name}-{i}"].node}
        if not placed:
            continue
        assert len(placed) == len(job.pods)  # all or nothing
        assert len({_domain(cluster.nodes[n][1], ZONE) for n in placed.values()}) == 1  # the job's zone
        for member in ("a", "b"):
            nodes = [placed[i] for i, p in enumerate(job.pods) if p.subgroup == member]
            if required:
                assert len({_domain(cluster.nodes[n][1], required) for n in nodes}) == 1, (member, nodes)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_a_single_gang_gets_its_preferred_domain_whenever_one_can_hold_it(cluster: Cluster) -> None:
    """One pending gang on a cluster with running pods: the state the domains are judged in is the
    one drawn, so the oracle below knows what the scheduler saw."""
    gang = cluster.gangs[0]
    alone = Cluster(cluster.nodes, cluster.free, [j for j in cluster.jobs if j.name in ("busy", gang[0])], [gang])
    by_job, reasons = _placements(alone, 1)
    name, pods, gpus, required, preferred = gang
    nodes = [node for status, node in by_job[name] if status == "Binding"]
    if required:
        could = any(room >= pods for room in _rooms(alone, required, gpus).values())
        assert bool(nodes) == could, (reasons.get(name), _rooms(alone, required, gpus))
    if preferred and nodes:
        fitting = {d for d, room in _rooms(alone, preferred, gpus).items() if room >= pods}
        if required:  # only preferred domains inside a required domain count
            fitting = {d for d in fitting if len(d) >= LEVELS.index(required) + 1}
        if fitting:
            domains = {_domain(cluster.nodes[n][1], preferred) for n in nodes}
            assert len(domains) == 1 and domains <= fitting, (nodes, fitting)
