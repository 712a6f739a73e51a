"""Reading resource.k8s.io objects: v1 and the older v1beta1 shapes, and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from kai_ray.errors import InputError
from kai_ray.io.snapshot_loader import snapshot_from_documents
from tests import manifests as m
from tests.cli.conftest import RunCli
from tests.dra import manifests as d


def test_v1beta1_slices_and_claims_read_like_v1() -> None:
    beta_slice = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "n1",
            "pool": {"name": "n1"},
            "devices": [
                {"name": "gpu-0", "basic": {"attributes": {"index": {"int": 0}}, "capacity": {"memory": "80Gi"}}}
            ],
        },
    }
    beta_claim = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "team"},
        "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 2}]}},
    }
    snapshot = snapshot_from_documents(
        [beta_slice, beta_claim, d.gpu_slice("n2", 1), d.claim("v1", d.request("gpu", 2))]
    )
    slices = {s.name: s for s in snapshot.dra.slices}
    [device] = slices["s"].devices
    assert device.attributes == (("gpu.nvidia.com", "index", 0),)
    assert device.capacity == (("gpu.nvidia.com", "memory", 80 * 2**30),)
    claims = {c.name: c for c in snapshot.dra.claims}
    assert claims["c"].requests == claims["v1"].requests
    assert claims["c"].gpus == 2


def test_an_allocated_claim_knows_its_node_and_devices() -> None:
    snapshot = snapshot_from_documents([d.claim("c", allocated=("n1", ["gpu-1", "gpu-2"]), reserved_for=["p"])])
    [claim] = snapshot.dra.claims
    assert claim.allocation is not None and claim.allocation.node == "n1"
    assert [r.key for r in claim.allocation.results] == ["gpu.nvidia.com/n1/gpu-1", "gpu.nvidia.com/n1/gpu-2"]
    assert claim.reserved_for == ("p",)


def test_a_template_claim_kubernetes_made_already_is_taken_by_its_recorded_name() -> None:
    pod = d.with_claims(m.pod("p", "q"), templates={"gpu": "t"})
    pod["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x7k9p"}]}
    snapshot = snapshot_from_documents([d.template("t"), d.claim("p-gpu-x7k9p"), pod])
    [loaded] = snapshot.pods
    assert loaded.resource_claims[0].claim == "p-gpu-x7k9p"
    assert {c.name for c in snapshot.dra.claims} == {"p-gpu-x7k9p"}  # no second claim made


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (
            d.claim("c", {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 0}}),
            "count: must be a positive integer",
        ),
        (d.claim("c", {"name": "gpu", "exactly": {"count": 1}}), "deviceClassName: missing"),
        (
            d.claim("c", {"name": "gpu", "exactly": {"deviceClassName": "x", "allocationMode": "Some"}}),
            "allocationMode",
        ),
        ({**d.gpu_slice("n"), "spec": {"nodeName": "n", "devices": []}}, "spec.driver: missing"),
        (d.device_class("x", ""), "cel.expression: missing"),
    ],
)
def test_malformed_dra_objects_are_one_line_errors_naming_the_field(
    broken: m.Manifest, message: str, kai_ray: RunCli, tmp_path: Path
) -> None:
    with pytest.raises(InputError, match=message):
        snapshot_from_documents([broken])
    result = kai_ray("schedule", "--snapshot", m.write(tmp_path / "s.yaml", [broken]))
    assert result.code == 2 and len(result.error_lines) == 1 and message.split(":")[0] in result.err
