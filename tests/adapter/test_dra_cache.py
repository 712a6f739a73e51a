"""The cache's DRA side and its GPU-reservation-pod rule, fed as the reflectors feed it."""

from __future__ import annotations

import copy

from k8s_adapter.cache import ClusterCache
from k8s_adapter.kinds import PODS, RESOURCE_CLAIMS, RESOURCE_SLICES
from tests import manifests as m
from tests.dra import manifests as d


def _versioned(obj: m.Manifest, version: int) -> m.Manifest:
    out = copy.deepcopy(obj)
    out["metadata"]["resourceVersion"] = str(version)
    return out


def test_slices_and_claims_become_dra_changes_once_and_deletions_follow() -> None:
    cache = ClusterCache()
    cache.on_list(RESOURCE_SLICES, [_versioned(d.gpu_slice("n1", 2), 1)])
    cache.on_list(RESOURCE_CLAIMS, [_versioned(d.claim("c"), 2)])
    first = cache.take_deltas().dra
    assert [s.name for s in first.slices_upserted] == ["n1-gpu.nvidia.com"]
    assert [c.key for c in first.claims_upserted] == ["team/c"]
    allocated = _versioned(d.claim("c", allocated=("n1", ["gpu-0"])), 3)
    cache.on_event(RESOURCE_CLAIMS, "MODIFIED", allocated)
    cache.on_event(RESOURCE_CLAIMS, "MODIFIED", _versioned(d.claim("c"), 2))  # stale: dropped
    [claim] = cache.take_deltas().dra.claims_upserted
    assert claim.allocation is not None and claim.allocation.node == "n1"
    cache.on_event(RESOURCE_CLAIMS, "DELETED", allocated)
    assert cache.take_deltas().dra.claims_removed == ("team/c",)
    assert not cache.take_deltas().dra


def test_a_malformed_claim_is_skipped_and_counted() -> None:
    cache = ClusterCache()
    bad = d.claim("bad", {"name": "gpu", "exactly": {"count": 1}})
    cache.on_list(RESOURCE_CLAIMS, [bad, d.claim("good")])
    assert [c.name for c in cache.take_deltas().dra.claims_upserted] == ["good"]
    assert cache.dra.decode_errors == 1


def test_gpu_reservation_pods_are_not_pods_to_the_scheduler() -> None:
    cache = ClusterCache()
    reservation = m.pod(
        "gpu-reservation-1",
        namespace="kai-resource-reservation",
        gpu=1,
        node_name="n1",
        scheduler="default-scheduler",
        labels={"app": "kai-resource-reservation", "runai-gpu-group": "g"},
    )
    cache.on_list(PODS, [reservation, m.pod("p", "q")])
    assert [p.key for p in cache.take_deltas().pods_upserted] == ["team/p"]
