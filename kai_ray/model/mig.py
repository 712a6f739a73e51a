"""MIG instances as KAI counts them.

A MIG-partitioned GPU is offered by the device plugin as extended resources named after the
instance profile, ``nvidia.com/mig-<slices>g.<memory>gb``; pods ask for them by the same name.
They stay named scalars for placement (a node has so many ``mig-1g.5gb`` free, like any other
extended resource), but KAI also counts them as GPUs wherever it sums GPUs (queue quota, fair
share, the cluster's capacity, idle-GPU filters): an instance of ``<n>g`` counts ``n`` GPUs. So
``mig-1g.5gb`` is one GPU and ``mig-3g.20gb`` three, however small the slice. A name with the
prefix that does not parse (``mig-1c.1g.5gb``, ...) is still a MIG resource for placement but
counts no GPUs, as in KAI.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping

from kai_ray import labels as L

MIG_PREFIX = "nvidia.com/mig-"
_PROFILE = re.compile(r"^nvidia\.com/mig-(\d+)g\.(\d+)gb$")


def is_mig_resource(name: str) -> bool:
    return name.startswith(MIG_PREFIX)


def profile_gpus(name: str) -> int | None:
    """The GPUs one instance of this MIG profile counts for (its compute slices), or None when
    the name is not of the ``<n>g.<m>gb`` form (KAI then counts it as no GPUs)."""
    match = _PROFILE.match(name)
    return int(match.group(1)) if match else None


def mig_instances(scalars: Mapping[str, float]) -> dict[str, float]:
    """The MIG profiles among extended resources, with their counts."""
    return {name: count for name, count in scalars.items() if is_mig_resource(name) and count}


def mig_gpus(scalars: Mapping[str, float]) -> float:
    """The GPUs these MIG instances count for in KAI's sums."""
    total = 0.0
    for name, count in scalars.items():
        if is_mig_resource(name):
            total += (profile_gpus(name) or 0) * count
    return total


class MigMode(enum.IntEnum):
    """How a node offers its GPUs, as KAI's resource-type predicate reads it."""

    NONE = 0  # not MIG-enabled
    ENABLED = 1  # MIG-enabled, no (known) strategy
    SINGLE = 2  # every GPU cut into one kind of instance, offered as nvidia.com/gpu
    MIXED = 3  # instances offered by profile


def node_mig_mode(labels: Mapping[str, str], offers_mig: bool, label_key: str = L.MIG_ENABLED_NODE_LABEL) -> MigMode:
    """A node's mode: MIG-enabled when its MIG-node label (``label_key``, KAI's
    ``--mig-worker-node-label-key``, ``node-role.kubernetes.io/mig-enabled`` by default) says so
    (a label that is there but is not a boolean says no) or, without the label, when it offers
    any MIG profile (``offers_mig``); then ``nvidia.com/mig.strategy`` says which strategy."""
    flag = labels.get(label_key)
    enabled = _parse_bool(flag) if flag is not None else offers_mig
    if not enabled:
        return MigMode.NONE
    strategy = labels.get(L.MIG_STRATEGY_NODE_LABEL, "")
    return {"single": MigMode.SINGLE, "mixed": MigMode.MIXED}.get(strategy, MigMode.ENABLED)


def lists_mig_profile(resource_names: Iterable[str]) -> bool:
    """Whether a node's allocatable names any MIG profile, whatever its count: KAI v0.12 counts a
    node without the MIG-node label as offering MIG when a profile is listed at all, even at zero
    (it keeps every listed name; releases from v0.14 on look only at non-zero counts)."""
    return any(is_mig_resource(name) for name in resource_names)


def _parse_bool(text: str) -> bool:
    # Go's strconv.ParseBool: these spellings are booleans, anything else is an error (= not MIG).
    return text in ("1", "t", "T", "TRUE", "true", "True")
