"""The partitioner's promises (shards/partitioner.py): rendezvous hashing moves as little as it can.

- Adding a shard moves only the nodes the new shard wins, and about 1/N of them.
- Removing a shard moves only that shard's nodes.
- Adding or removing nodes changes no other node's owner.
- The owner of a node is the same in every process (no dependence on Python's hash seed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from shards import partitioner

node_names = st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True), min_size=1, max_size=40, unique=True)
shard_sets = st.lists(st.integers(0, 30), min_size=1, max_size=6, unique=True)


@settings(max_examples=60, deadline=None)
@given(nodes=node_names, before=shard_sets, added=st.integers(0, 30))
def test_adding_a_shard_moves_only_the_nodes_it_wins(nodes: list[str], before: list[int], added: int) -> None:
    assume(added not in before)
    after = [*before, added]
    moved = partitioner.moves(nodes, before, after)
    assert all(new == added for _, new in moved.values())
    assert set(moved) == {n for n in nodes if partitioner.owner(n, after) == added}


@settings(max_examples=60, deadline=None)
@given(nodes=node_names, before=shard_sets.filter(lambda ids: len(ids) > 1), data=st.data())
def test_removing_a_shard_moves_only_its_nodes(nodes: list[str], before: list[int], data: st.DataObject) -> None:
    removed = data.draw(st.sampled_from(before))
    after = [s for s in before if s != removed]
    moved = partitioner.moves(nodes, before, after)
    assert set(moved) == {n for n in nodes if partitioner.owner(n, before) == removed}


@settings(max_examples=60, deadline=None)
@given(nodes=node_names, others=node_names, shards=shard_sets)
def test_other_nodes_coming_and_going_change_no_owner(nodes: list[str], others: list[str], shards: list[int]) -> None:
    alone = partitioner.assign(nodes, shards)
    together = partitioner.assign([*nodes, *others], shards)
    assert all(together[n] == owner for n, owner in alone.items())


def test_a_new_shard_takes_about_its_share() -> None:
    nodes = [f"node-{i:05d}" for i in range(4000)]
    moved = partitioner.moves(nodes, [0, 1, 2, 3], [0, 1, 2, 3, 4])
    assert 0.16 < len(moved) / len(nodes) < 0.24  # 1/5 expected


def test_owners_are_the_same_in_another_process() -> None:
    nodes = [f"gpu-node-{i}" for i in range(50)]
    script = (
        "import json, sys; from shards import partitioner; "
        "print(json.dumps(partitioner.assign(json.loads(sys.argv[1]), [0, 1, 2, 3, 4])))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", script, json.dumps(nodes)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
    )
    assert json.loads(out.stdout) == partitioner.assign(nodes, [0, 1, 2, 3, 4])
