"""Sub-group trees without topology: KAI's worked cases (allocate_subgroups_test.go) and the
min-subgroups design's examples, through the readers and the session ``kai-ray schedule`` runs."""

from __future__ import annotations

from typing import Any

import pytest

from tests.topology.cluster import Job, Pod, decide_docs, documents

Spec = dict[str, Any]


def sub(name: str, minimum: int | None = None, parent: str | None = None, min_sub_group: int | None = None) -> Spec:
    out: Spec = {"name": name}
    if minimum is not None:
        out["minMember"] = minimum
    if parent:
        out["parent"] = parent
    if min_sub_group is not None:
        out["minSubGroup"] = min_sub_group
    return out


def pods(*members: tuple[str, int, str | None]) -> tuple[Pod, ...]:
    """(sub-group, GPUs, node it runs on or None)."""
    return tuple(Pod(subgroup=s, gpus=g, node=n) for s, g, n in members)


def statuses(docs: list[Spec], job: str) -> dict[int, tuple[str, str | None]]:
    decisions = decide_docs(docs)
    out = {}
    for key, pod in decisions.pods.items():
        name = key.split("/", 1)[1]
        if name.startswith(f"{job}-"):
            out[int(name.rsplit("-", 1)[1])] = (pod.status, pod.node)
    return out


KAI_CASES = [
    (
        "unbalanced hierarchy structure",
        8,
        {"subGroups": [sub("sub-ab"), sub("sub-a", 2, "sub-ab"), sub("sub-b", 2, "sub-ab"), sub("sub-c", 1)]},
        pods(("sub-a", 1, None), ("sub-a", 1, None), ("sub-b", 1, None), ("sub-b", 1, None), ("sub-c", 4, None)),
        {i: "Binding" for i in range(5)},
    ),
    (
        "cannot satisfy sub group gang",
        4,
        {"subGroups": [sub("sub0", 1), sub("sub1", 2)]},
        pods(("sub0", 3, None), ("sub0", 3, None), ("sub1", 1, None), ("sub1", 1, None)),
        {i: "Pending" for i in range(4)},
    ),
    (
        "tree sub-groups and minSubGroup - the unsatisfied group gets priority",
        4,
        {
            "subGroups": [
                sub("group-ab", min_sub_group=1),
                sub("sub-a", 1, "group-ab"),
                sub("sub-b", 1, "group-ab"),
                sub("group-cd"),
                sub("sub-c", 1, "group-cd"),
                sub("sub-d", 1, "group-cd"),
            ]
        },
        pods(
            ("sub-a", 1, "node0"),
            ("sub-b", 1, None),
            ("sub-b", 1, None),
            ("sub-c", 1, None),
            ("sub-c", 1, None),
            ("sub-d", 1, None),
            ("sub-d", 1, None),
        ),
        {0: "Running", 1: "Binding", 2: "Pending", 3: "Binding", 4: "Pending", 5: "Binding", 6: "Pending"},
    ),
    (
        "minSubGroup - only the first required member is placed in the gang phase",
        2,
        {
            "minSubGroup": 1,
            "subGroups": [
                sub("group-a"),
                sub("sub-a1", 1, "group-a"),
                sub("sub-a2", 1, "group-a"),
                sub("group-b"),
                sub("sub-b1", 1, "group-b"),
                sub("sub-b2", 1, "group-b"),
            ],
        },
        pods(("sub-a1", 1, None), ("sub-a2", 1, None), ("sub-b1", 1, None), ("sub-b2", 1, None)),
        {0: "Binding", 1: "Binding", 2: "Pending", 3: "Pending"},
    ),
    (
        "minSubGroup - the elastic phase places one more member",
        2,
        {
            "minSubGroup": 1,
            "subGroups": [sub("group-a"), sub("sub-a1", 1, "group-a"), sub("group-b"), sub("sub-b1", 1, "group-b")],
        },
        pods(("sub-a1", 1, "node0"), ("sub-b1", 1, None)),
        {0: "Running", 1: "Binding"},
    ),
]


@pytest.mark.parametrize(("name", "gpus", "spec", "members", "expected"), KAI_CASES, ids=[c[0] for c in KAI_CASES])
def test_kai_sub_group_allocate_table(
    name: str, gpus: int, spec: Spec, members: tuple[Pod, ...], expected: dict[int, str]
) -> None:
    docs = documents((), {"node0": (gpus, {})}, [Job("job0", 1, members, spec)])
    assert {i: s for i, (s, _) in statuses(docs, "job0").items()} == expected


def prefill_replicas(free: int) -> list[Spec]:
    """The min-subgroups design's example: 4 prefill replicas of 8 pods, 3 of them required."""
    spec = {"minSubGroup": 3, "subGroups": [sub(f"prefill-{r}", 8) for r in range(4)]}
    members = tuple(Pod(subgroup=f"prefill-{r}") for r in range(4) for _ in range(8))
    return documents((), {f"node{i}": (8, {}) for i in range(free // 8)}, [Job("inference", 1, members, spec)])


def test_three_of_four_replicas_are_enough_to_start() -> None:
    placed = statuses(prefill_replicas(free=24), "inference")
    bound = [i for i, (s, _) in placed.items() if s == "Binding"]
    assert len(bound) == 24 and {i // 8 for i in bound} == {0, 1, 2}  # three whole replicas, none partial


def test_two_of_four_replicas_are_not_enough() -> None:
    placed = statuses(prefill_replicas(free=16), "inference")
    assert {s for s, _ in placed.values()} == {"Pending"}


def test_a_missing_optional_replica_does_not_make_a_running_gang_stale() -> None:
    """Replicas 0-2 run, replica 3 cannot be placed: the gang is satisfied (minSubGroup 3), so
    stale-gang eviction leaves it alone."""
    spec = {"minSubGroup": 3, "subGroups": [sub(f"prefill-{r}", 2) for r in range(4)]}
    members = tuple(Pod(subgroup=f"prefill-{r}", node="node0" if r < 3 else None) for r in range(4) for _ in range(2))
    docs = documents((), {"node0": (6, {})}, [Job("inference", 1, members, spec)])
    decisions = decide_docs(docs, ("allocate", "stalegangeviction"))
    assert [p.status for k, p in decisions.pods.items() if "inference" in k].count("Running") == 6
    assert not decisions.evictions


def test_the_podgroups_own_min_member_is_kept_on_top_of_its_sub_groups() -> None:
    """minMember 3 over two sub-groups that need 1 each: the gang waits for 3 pods, not 2."""
    spec = {"minMember": 3, "subGroups": [sub("a", 1), sub("b", 1)]}
    members = pods(("a", 1, None), ("a", 1, None), ("b", 1, None))
    two = statuses(documents((), {"node0": (2, {})}, [Job("job0", 1, members, spec)]), "job0")
    assert {s for s, _ in two.values()} == {"Pending"}
    three = statuses(documents((), {"node0": (3, {})}, [Job("job0", 1, members, spec)]), "job0")
    assert {s for s, _ in three.values()} == {"Binding"}


def test_a_pod_naming_no_leaf_sub_group_waits_with_kais_reason() -> None:
    spec = {"subGroups": [sub("group"), sub("leaf", 1, "group")]}
    members = (Pod(subgroup="leaf"), Pod(subgroup="group"), Pod(subgroup="nowhere"))
    decisions = decide_docs(documents((), {"node0": (4, {})}, [Job("job0", 1, members, spec)]))
    assert decisions.pods["default/job0-0"].status == "Binding"
    for i, name in ((1, "group"), (2, "nowhere")):
        pod = decisions.pods[f"default/job0-{i}"]
        assert pod.status == "Pending" and f"Pod references subgroup '{name}', which does not exist" in pod.reason
