"""The CRD upgrader hook: Helm runs `kai-ray apply-crds` before every install and upgrade, with a
role that allows exactly what that command does, and the command brings a cluster's CRDs up to date."""

from __future__ import annotations

import asyncio
import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import DevCluster, DevClusterThread
from k8s_adapter.api import connect
from k8s_adapter.crd_upgrade import apply_crds, read_crds, wait_established
from kai_ray.app.cli.main import build_parser
from kai_ray.errors import InputError
from tests.adapter.fake_api import FakeApi, ok
from tests.helm.chart import CHART, NAMESPACE, RELEASE, crds, find, one, render
from tests.helm.rbac import permission

HOOK_NAME = f"{RELEASE}-crd-upgrader"
CRD_NAMES = sorted(c["metadata"]["name"] for c in crds())


def hook_objects(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [o for o in render(values) if o["metadata"]["name"] == HOOK_NAME]


def test_the_hook_runs_before_install_and_upgrade_with_its_rbac_in_place_first() -> None:
    objects = hook_objects()
    assert sorted(o["kind"] for o in objects) == ["ClusterRole", "ClusterRoleBinding", "Job", "ServiceAccount"]
    weights = {}
    for obj in objects:
        annotations = obj["metadata"]["annotations"]
        assert annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
        assert set(annotations["helm.sh/hook-delete-policy"].split(",")) == {"before-hook-creation", "hook-succeeded"}
        weights[obj["kind"]] = int(annotations["helm.sh/hook-weight"])
    assert max(w for k, w in weights.items() if k != "Job") < weights["Job"]  # identity and role exist first


def test_the_job_runs_apply_crds_from_the_image_as_its_own_service_account() -> None:
    job = one(hook_objects(), "Job")
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert pod["serviceAccountName"] == HOOK_NAME and pod["restartPolicy"] == "OnFailure"
    assert container["command"] == ["kai-ray"]
    args = build_parser().parse_args(container["args"])
    assert args.command == "apply-crds" and args.dir == "/opt/kai-ray/crds" and args.kubeconfig in (None, "")
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    dockerfile = (CHART.parents[1] / "Dockerfile").read_text()
    assert "COPY helm/kai-ray/crds /opt/kai-ray/crds" in dockerfile  # the directory the hook reads exists


async def _recorded_apply() -> set[tuple[str, str, str]]:
    established = {"status": {"conditions": [{"type": "Established", "status": "True"}]}}
    api = FakeApi(lambda m, p, q, b: ok(established) if m == "GET" else ok())
    names = await apply_crds(api, read_crds(CHART / "crds"))  # type: ignore[arg-type]
    assert await wait_established(api, names, timeout=1) == []  # type: ignore[arg-type]
    assert {path.rsplit("/", 1)[1] for _, path, _ in api.calls} == set(CRD_NAMES)
    return {permission(method, path) for method, path, _ in api.calls}


def test_the_hook_role_allows_exactly_what_apply_crds_does_on_the_charts_crds_only() -> None:
    used = asyncio.run(_recorded_apply())
    # An apply that creates its object is authorized as create as well (kube-apiserver's rule).
    used |= {(g, r, "create") for g, r, v in used if v == "patch"}
    [rule] = one(hook_objects(), "ClusterRole")["rules"]
    allowed = {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    assert allowed == used
    assert sorted(rule["resourceNames"]) == CRD_NAMES  # only the chart's own CRDs, none other


def test_the_hook_binding_gives_the_role_to_the_jobs_account_and_switches_off() -> None:
    binding = one(hook_objects(), "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == HOOK_NAME
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": HOOK_NAME, "namespace": NAMESPACE}]
    assert hook_objects({"crdUpgrader": {"enabled": False}}) == []
    assert sorted(o["kind"] for o in hook_objects({"rbac": {"create": False}})) == ["Job", "ServiceAccount"]
    scheduler_role = one(render(), "ClusterRole", RELEASE)  # the scheduler itself never touches CRDs
    assert all(r["apiGroups"] != ["apiextensions.k8s.io"] for r in scheduler_role["rules"])
    assert len(find(render(), "ClusterRole")) == 2


def test_read_crds_refuses_a_directory_without_crds_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "queue.yaml").write_text("apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: q}\n")
    with pytest.raises(InputError, match="not an apiextensions.k8s.io/v1 CustomResourceDefinition"):
        read_crds(tmp_path)
    with pytest.raises(InputError, match="not a directory"):
        read_crds(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no CustomResourceDefinition"):
        read_crds(tmp_path / "empty")


def _newer_crds(target: Path) -> str:
    """The chart's CRDs, with one change an upgrade would bring: a new printer column on Queue."""
    target.mkdir()
    for crd in crds():
        changed = copy.deepcopy(crd)
        if crd["metadata"]["name"] == "queues.scheduling.run.ai":
            changed["spec"]["versions"][0]["additionalPrinterColumns"].append(
                {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
            )
        (target / f"{crd['metadata']['name']}.yaml").write_text(yaml.safe_dump(changed))
    return "queues.scheduling.run.ai"


async def test_apply_crds_upgrades_what_a_cluster_serves(tmp_path: Path) -> None:
    changed = _newer_crds(tmp_path / "crds")
    async with DevCluster() as cluster:
        api = await connect(str(cluster.write_kubeconfig(tmp_path / "kubeconfig")))
        try:
            names = await apply_crds(api, read_crds(tmp_path / "crds"))
            assert await wait_established(api, names, timeout=5) == []
        finally:
            await api.close()
        served = cluster.get("apiextensions.k8s.io", "v1", "customresourcedefinitions", changed)
        assert served is not None
        columns = [c["name"] for c in served["spec"]["versions"][0]["additionalPrinterColumns"]]
        assert columns[-1] == "Age"
        assert cluster.get("apiextensions.k8s.io", "v1", "customresourcedefinitions", "topologies.kai.scheduler")
        cluster.create("kai.scheduler", "v1alpha1", "topologies", {"metadata": {"name": "t"}, "spec": {"levels": []}})


def test_the_command_prints_what_it_applied_and_exits_0(tmp_path: Path) -> None:
    with DevClusterThread() as cluster:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "kai_ray",
                "apply-crds",
                "--dir",
                str(CHART / "crds"),
                "--kubeconfig",
                str(kubeconfig),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 0, result.stderr
    assert sorted(line.split("/", 1)[1].split()[0] for line in result.stdout.splitlines()) == CRD_NAMES
