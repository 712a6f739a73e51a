"""The GPU headroom a victim search counts, kept across changes of the table: after any
sequence of holds and releases (whole GPUs and shared ones, active, releasing and pipelined),
the answer worked out from the rows changed since the last one equals a fresh pass."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.actions import gpu_headroom
from kai_ray.model import Node, ResourceVector
from placement.holdings import Holding, Kind
from placement.node_table import NodeTable
from placement.shapes import GPU, ResourceSchema

MIB = 10_000  # one device's memory


def fresh(table: NodeTable) -> np.ndarray:
    return np.array([gpu_headroom.gpu_headroom(table, row) for row in range(len(table))])


ops = st.lists(
    st.tuples(
        st.sampled_from(["hold", "hold", "release", "ask"]),
        st.integers(0, 5),  # node
        st.sampled_from(list(Kind)),
        st.integers(0, 3),  # whole GPUs (0: a share of a device)
        st.integers(1, MIB),  # share MiB
        st.integers(0, 1),  # which shared device
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_headroom_worked_out_from_changed_rows_equals_a_fresh_pass(
    steps: list[tuple[str, int, Kind, int, int, int]],
) -> None:
    schema = ResourceSchema()
    nodes = [Node(f"n{i}", ResourceVector.of(64_000, 1 << 40, 8, 110), gpu_memory_mib=MIB) for i in range(6)]
    table = NodeTable(schema, nodes)
    held: list[Holding] = []
    for what, node, kind, whole, mib, device in steps:
        if what == "hold":
            vector = np.zeros(schema.width)
            if whole:
                vector[GPU] = whole
                held.append(table.hold(f"p{len(held)}", node, kind, vector))
            else:
                gid = f"n{node}-g{device}"
                create = () if gid in table.groups[node] else (gid,)
                held.append(table.hold(f"p{len(held)}", node, kind, vector, [(gid, mib)], create))
        elif what == "release" and held:
            table.release(held.pop(node % len(held)))
        answer = gpu_headroom.gpu_headroom_all(table)
        assert np.array_equal(answer, fresh(table))
