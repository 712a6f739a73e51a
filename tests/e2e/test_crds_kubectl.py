"""KAI's CRDs (the chart's) on a real apiserver, KAI's own manifests through them, and kubectl
creating a List it printed itself, on both clusters."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from k8s_adapter.api import KubeError
from tests.e2e.backends import Backend
from tests.helm.chart import crds
from tests.helm.test_crds import API_VERSIONS, BROKEN, KAI_MANIFESTS

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def _collection(obj: dict[str, Any]) -> str:
    plural = {"Queue": "queues", "PodGroup": "podgroups", "Topology": "topologies"}[obj["kind"]]
    namespace = obj["metadata"].get("namespace")
    where = f"/namespaces/{namespace}" if namespace else ""
    return f"/apis/{obj['apiVersion']}{where}/{plural}"


async def test_the_charts_crds_are_established_with_the_served_versions(real: Backend) -> None:
    for crd in crds():
        found = await real.get(f"{CRDS}/{crd['metadata']['name']}")
        conditions = {c["type"]: c["status"] for c in found["status"]["conditions"]}
        assert conditions["Established"] == "True" and conditions["NamesAccepted"] == "True"
        assert found["status"]["acceptedNames"]["kind"] == crd["spec"]["names"]["kind"]
        served = {v["name"]: (v["served"], v["storage"]) for v in found["spec"]["versions"]}
        assert served == {v["name"]: (v["served"], v["storage"]) for v in crd["spec"]["versions"]}
        assert found["status"]["storedVersions"] == [v["name"] for v in crd["spec"]["versions"] if v["storage"]]


async def test_kais_own_manifests_are_accepted_strictly(cluster: Backend) -> None:
    manifests = list(yaml.safe_load_all(KAI_MANIFESTS))
    for namespace in sorted({m["metadata"].get("namespace") for m in manifests} - {None}):
        await cluster.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
    try:
        for manifest in manifests:
            created = await cluster.create(_collection(manifest), manifest, fieldValidation="Strict")
            assert created["spec"] == manifest["spec"]
            assert "status" not in created or created["status"] != manifest.get(
                "status"
            )  # status is its own subresource
    finally:
        for manifest in manifests:
            path = f"{_collection(manifest)}/{manifest['metadata']['name']}"
            try:
                await cluster.api.request("DELETE", path)
            except KubeError as error:
                assert error.status == 404


@pytest.mark.parametrize(("kind", "body", "complaint"), BROKEN, ids=[b[2] for b in BROKEN])
async def test_the_real_apiserver_refuses_what_the_schema_check_refuses(
    real: Backend, kind: str, body: dict[str, Any], complaint: str
) -> None:
    """The chart's schemas as kube-apiserver enforces them agree with tests/helm's strict check."""
    manifest = {"apiVersion": API_VERSIONS[kind], "kind": kind, "metadata": {"name": "x", "namespace": "default"}}
    manifest.update(body)
    if kind in ("Queue", "Topology"):  # cluster-scoped
        del manifest["metadata"]["namespace"]
    with pytest.raises(KubeError) as refused:
        await real.create(_collection(manifest), manifest, fieldValidation="Strict")
    assert refused.value.status in (400, 422), refused.value.body


def _kubectl(cluster: Backend, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    kubectl = shutil.which("kubectl")
    assert kubectl is not None
    return subprocess.run(
        [kubectl, "--kubeconfig", str(cluster.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin,
    )


async def test_kubectl_creates_a_list_it_printed(cluster: Backend, pytestconfig: pytest.Config) -> None:
    """`kubectl get -o json` then `kubectl create -f` of that List: kubectl validates a List with
    the OpenAPI v2 document, so a server without /openapi/v2 makes it fail."""
    if shutil.which("kubectl") is None:
        if pytestconfig.getoption("--e2e"):
            pytest.fail("the e2e tier needs kubectl on PATH")
        pytest.skip("kubectl is not installed")
    manifest = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: '1'}\n---\n"
        "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: listed}\n"
        "spec: {resources: {gpu: {quota: 1, limit: -1, overQuotaWeight: 1}, "
        "cpu: {quota: -1, limit: -1, overQuotaWeight: 1}, memory: {quota: -1, limit: -1, overQuotaWeight: 1}}}\n"
    )
    made = await asyncio.to_thread(_kubectl, cluster, "create", "-f", "-", stdin=manifest)
    assert made.returncode == 0, made.stderr
    printed = await asyncio.to_thread(_kubectl, cluster, "get", "configmap/settings", "queue/listed", "-o", "json")
    assert printed.returncode == 0, printed.stderr
    listed = json.loads(printed.stdout)
    assert listed["kind"] == "List" and len(listed["items"]) == 2
    removed = await asyncio.to_thread(_kubectl, cluster, "delete", "configmap/settings", "queue/listed")
    assert removed.returncode == 0, removed.stderr
    again = await asyncio.to_thread(_kubectl, cluster, "create", "-f", "-", stdin=printed.stdout)
    assert again.returncode == 0, again.stderr
    assert "configmap/settings created" in again.stdout and "queue.scheduling.run.ai/listed created" in again.stdout
    await asyncio.to_thread(_kubectl, cluster, "delete", "configmap/settings", "queue/listed")
