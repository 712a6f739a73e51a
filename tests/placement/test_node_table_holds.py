"""The node table's cheaper ways to change holds leave every row's free capacity exactly as the
plain ones do: a hold turned into another kind in one step (an eviction and its undo), and a run
of changes worked into the rows once at its end (a rollback)."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kai_ray.model import ResourceVector
from placement.holdings import Holding, Kind
from placement.node_table import NodeTable
from placement.shapes import ResourceSchema
from tests.builders import node

SCHEMA = ResourceSchema(())
ROWS = 4


def _table(rows: int = ROWS) -> NodeTable:
    return NodeTable(SCHEMA, [node(f"n{i}", gpu=4) for i in range(rows)])


def _random_hold(table: NodeTable, rng: random.Random, serial: int) -> Holding:
    row = rng.randrange(len(table))
    vector = SCHEMA.vector(
        ResourceVector.of(cpu=rng.choice([250, 1000]), memory=2**30, gpu=rng.choice([0, 1, 2]), pods=1)
    )
    shares: tuple[tuple[str, int], ...] = ()
    create: tuple[str, ...] = ()
    if rng.random() < 0.4:  # a fraction on one of two shared GPUs of the node
        gid = f"g{row}-{rng.randrange(2)}"
        vector[2] = 0.0
        shares = ((gid, rng.choice([20_480, 40_960])),)
        create = (gid,) if rng.random() < 0.5 else ()
    return table.hold(f"p{serial}", row, rng.choice(list(Kind)), vector, shares, create)


def _free_capacity(table: NodeTable) -> tuple[np.ndarray, ...]:
    return table.idle.copy(), table.future.copy(), table.room_future.copy(), table.room_idle.copy()


def _same(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32))
def test_a_hold_turned_into_another_kind_frees_what_giving_it_back_and_holding_again_would(seed: int) -> None:
    one_step, two_steps = _table(), _table()
    rng_a, rng_b = random.Random(seed), random.Random(seed)
    holds_a = [_random_hold(one_step, rng_a, i) for i in range(12)]
    holds_b = [_random_hold(two_steps, rng_b, i) for i in range(12)]
    moves = random.Random(seed + 1)
    for _ in range(20):
        i, kind = moves.randrange(len(holds_a)), moves.choice(list(Kind))
        holds_a[i] = one_step.rehold(holds_a[i], kind)
        old = holds_b[i]
        holds_b[i] = two_steps.hold(old.pod, old.node, kind, old.vector, old.shares, old.created_groups)
        two_steps.release(old)
        a, b = holds_a[i], holds_b[i]
        assert (a.pod, a.node, a.kind, a.shares, a.created_groups) == (
            b.pod,
            b.node,
            b.kind,
            b.shares,
            b.created_groups,
        )
        assert np.array_equal(a.vector, b.vector)
        assert _same(_free_capacity(one_step), _free_capacity(two_steps))
        assert one_step.groups == two_steps.groups


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from([4, 40]))
def test_changes_worked_in_once_leave_the_rows_as_changes_worked_in_one_by_one(seed: int, rows: int) -> None:
    """With 40 rows a rollback-sized run of changes is worked in by one pass over many rows,
    rows with shared GPUs among them; with 4, row by row."""
    batched, stepwise = _table(rows), _table(rows)
    rng_a, rng_b = random.Random(seed), random.Random(seed)
    holds = rows * 3
    holds_a = [_random_hold(batched, rng_a, i) for i in range(holds)]
    holds_b = [_random_hold(stepwise, rng_b, i) for i in range(holds)]
    log = batched.track_changes()
    before = len(log)
    order = list(range(holds))
    random.Random(seed + 1).shuffle(order)
    released = order[: holds * 2 // 3]
    with batched.refreshed_once():
        for i in released:
            batched.release(holds_a[i])
        inside = _free_capacity(batched)
    for i in released:
        stepwise.release(holds_b[i])
    assert _same(_free_capacity(batched), _free_capacity(stepwise))
    first_changed = list(dict.fromkeys(holds_a[i].node for i in released))
    assert log[before:] == first_changed  # each changed row shows as changed once, in that order
    stamps = [int(batched.stamp[row]) for row in first_changed]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    assert int(batched.clock) == max(stamps)
    assert not _same(inside, _free_capacity(batched))  # worked in on the way out
