"""The shard-scaling benchmark's own parts: the decisions' digest, the CPU meter on an in-process
row, and the node-count factor. Its Ray rows are measured by the command, not here."""

from __future__ import annotations

from loadtests.contention import drive as contention_drive
from loadtests.contention import reclaim_storm
from loadtests.results import compare_runs
from loadtests.shard_scaling import FULL, digest, metered
from loadtests.systems import in_process


def test_the_digest_ignores_order_and_sees_a_changed_node() -> None:
    decided = {"bench/a": ("Binding", "node-1"), "bench/b": ("Pipelined", "node-2")}
    reordered = {"bench/b": ("Pipelined", "node-2"), "bench/a": ("Binding", "node-1")}
    moved = {"bench/a": ("Binding", "node-3"), "bench/b": ("Pipelined", "node-2")}
    assert digest((decided, [])) == digest((reordered, []))
    assert digest((decided, [])) != digest((moved, []))


def test_an_in_process_row_carries_its_cpu_and_digest_and_agrees_with_itself() -> None:
    rows = compare_runs(metered(contention_drive), reclaim_storm(nodes=6, jobs=40), [("a", in_process)] * 2)
    assert all(row.coordinator_cpu > 0 and "decisions " in row.notes for row in rows)
    assert "actor processes" not in rows[0].notes  # no shard actor in process
    assert not any("DIFFERENT" in row.notes for row in rows)


def test_the_node_factor_scales_nodes_and_nothing_else() -> None:
    quarter = FULL.scaled(0.25)
    assert (quarter.contention_nodes, quarter.topology["nodes"], quarter.dra["nodes"]) == (125, 1_250, 12_500)
    assert (quarter.reclaimers, quarter.topology["gangs"], quarter.dra["pods"]) == (4_000, 1_000, 4_000)
