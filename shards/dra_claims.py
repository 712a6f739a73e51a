"""A shard's DRA claims: the devices and claims cluster changes bring, and the claims a prepared
reservation holds until it is committed or let go (the device book itself: ``placement.dra_devices``)."""

from __future__ import annotations

from collections.abc import Sequence

from kai_ray.model import Device
from placement.node_table import NodeTable
from shards.messages import ClaimHold, Placement


def apply_dra(table: NodeTable, devices: Sequence[tuple[str, tuple[Device, ...]]], claims: Sequence[ClaimHold]) -> None:
    """Cluster changes: a node's device list, claims allocated (or released) on its nodes."""
    book = table.devices
    for node_name, listed in devices:
        at = table.index.get(node_name)
        if at is not None:
            book.set_devices(at, listed)
    for claim, node, keys in claims:
        if not keys:
            book.release(claim)
            continue
        row = table.index.get(node) if node is not None else None
        problem = book.take(claim, keys, row)
        if problem:  # the API server is the truth: the claim there wins over an assumed one
            for key in keys:
                other = book.owner.get(key)
                if other is not None and other != claim:
                    book.release(other)
            book.take(claim, keys, row)


def take_claims(table: NodeTable, placement: Placement, taken: list[str]) -> str:
    """Hold the devices a prepared placement allocates; a problem in words if one is taken."""
    row = table.index.get(placement.node)
    for claim, keys in placement.claims:
        if claim in table.devices.claims:
            if set(table.devices.claims[claim].keys) != set(keys):
                return f"claim {claim} is already allocated other devices"
            continue
        missing = [k for k in keys if k not in table.devices.by_key]
        if missing:
            return f"device {missing[0]} is not on node {placement.node}"
        problem = table.devices.take(claim, keys, row)
        if problem:
            return f"node {placement.node}: {problem}"
        taken.append(claim)
    return ""


def release_claims(table: NodeTable, claims: Sequence[str]) -> None:
    for claim in reversed(claims):
        table.devices.release(claim)
