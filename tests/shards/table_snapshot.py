"""A shard table's holds, views and shared GPUs copied out, to tell whether a step changed them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from shards.shard import Shard


@dataclass(frozen=True, slots=True)
class TableState:
    """Holds and views by column name (a prepare may widen the table's columns), and shared GPUs."""

    columns: dict[str, npt.NDArray[np.float64]]
    groups: list[dict[str, tuple[int, int, int, bool]]]


def table_state(shard: Shard) -> TableState:
    table = shard.table
    names = ["cpu", "memory", "gpu", "pods", *table.schema.scalars]
    columns = {
        f"{label} {name}": values[..., j].copy()
        for label, values in (("held", table.held), ("idle", table.idle), ("future", table.future))
        for j, name in enumerate(names)
    }
    groups = [{g: (u.active, u.releasing, u.pipelined, u.owns_slot) for g, u in row.items()} for row in table.groups]
    return TableState(columns, groups)


def unchanged(before: TableState, after: TableState) -> bool:
    """Nothing held or freed; a column that is new since ``before`` holds nothing."""
    if before.groups != after.groups:
        return False
    for key, values in after.columns.items():
        old = before.columns.get(key)
        if old is None:
            if key.startswith("held") and values.any():
                return False
        elif not np.array_equal(values, old):
            return False
    return True
