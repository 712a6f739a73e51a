"""RBAC for real: the chart's objects rendered by Helm's engine, applied to kube-apiserver, and
`kai-ray run` started as the chart's Deployment starts it, with a token of the chart's
ServiceAccount. A full run (binds, a reclaim with evictions, explanations, events, the leader
Lease) must meet no 403; an operation the chart does not grant must be refused.

The apiserver's audit log records every request of that ServiceAccount with its response code,
so "no 403" is read from the server's side, not from kai-ray's logs.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from k8s_adapter.api import KubeError, connect
from realcluster.cluster import free_port
from tests.adapter.conftest import pod, pod_group, queue
from tests.e2e.backends import GROUPS, PODS, QUEUES, Backend, until_true
from tests.e2e.conftest import SA_USER
from tests.helm.chart import NAMESPACE, RELEASE, find, one, render

REPO = Path(__file__).resolve().parents[2]
APPLIED_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "PriorityClass", "Queue")
PATHS = {
    "ServiceAccount": f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/roles",
    "RoleBinding": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/rolebindings",
    "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
    "Queue": QUEUES,
}


def audit_size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def audit_entries(path: Path, user: str, since: int = 0) -> list[dict[str, Any]]:
    """The user's completed requests logged after byte ``since`` of the audit log."""
    with path.open("rb") as log:
        log.seek(since)
        lines = log.read().decode().splitlines()
    entries = []
    for line in lines:
        entry = json.loads(line)
        if entry.get("user", {}).get("username") == user and entry.get("stage") == "ResponseComplete":
            entries.append(entry)
    return entries


def forbidden(entries: list[dict[str, Any]]) -> list[str]:
    return [f"{e['verb']} {e['requestURI']}" for e in entries if (e.get("responseStatus") or {}).get("code") == 403]


async def apply_chart(real: Backend) -> tuple[list[dict[str, Any]], str]:
    """The chart's RBAC, ServiceAccount, priority classes and default queues; returns (objects, SA name)."""
    objects = render({"scheduler": {"shards": 0, "period": 0.2}})
    for obj in objects:
        # Hook objects (the CRD upgrader's) run before an install, not as the scheduler.
        if obj["kind"] in APPLIED_KINDS and "helm.sh/hook" not in (obj["metadata"].get("annotations") or {}):
            try:
                await real.create(PATHS[obj["kind"]], obj)
            except KubeError as error:
                if error.status != 409:  # already there from an earlier run of this session
                    raise
    return objects, one(objects, "ServiceAccount", RELEASE)["metadata"]["name"]


async def service_account_token(real: Backend, name: str) -> str:
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    answer = await real.create(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{name}/token", request)
    return str(answer["status"]["token"])


def chart_command(objects: list[dict[str, Any]], kubeconfig: Path, workdir: Path, port: int) -> list[str]:
    """The Deployment's `kai-ray run` arguments, with the ConfigMap's file and a local port."""
    [deployment] = find(objects, "Deployment")
    [container] = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "scheduler"]
    config = workdir / "config.yaml"
    [config_map] = [o for o in find(objects, "ConfigMap") if "config.yaml" in o.get("data", {})]
    config.write_text(config_map["data"]["config.yaml"])
    args = []
    for arg in container["args"]:
        if arg.startswith("--config="):
            arg = f"--config={config}"
        elif arg.startswith("--metrics-port="):
            arg = f"--metrics-port={port}"
        args.append(arg)
    return [sys.executable, "-m", "kai_ray", *args, "--kubeconfig", str(kubeconfig)]


async def test_a_full_run_under_the_charts_role_meets_no_403(real: Backend, tmp_path: Path) -> None:
    assert real.real is not None
    objects, account = await apply_chart(real)
    assert f"system:serviceaccount:{NAMESPACE}:{account}" == SA_USER
    token = await service_account_token(real, account)
    kubeconfig = real.real.kubeconfig(token=token, name="kai-ray-sa")

    # Work that needs every grant: binds, a gang that must wait (PodGroup status + Event), and a
    # reclaim (evictions) when a queue owed its quota asks for GPUs another queue borrowed.
    await real.create(QUEUES, queue("greedy", gpu_quota=0))
    await real.create(QUEUES, queue("owed", gpu_quota=16))
    await real.create(GROUPS, pod_group("too-big", "owed", 1))  # never fits: explained in status and Events
    await real.create(PODS, pod("too-big-0", gpus=16, group="too-big"))
    for i in range(4):
        await real.create(PODS, pod(f"greedy-{i}", gpus=8, queue_name="greedy"))
    port = free_port()
    since = audit_size(real.real.audit_log)
    command = chart_command(objects, kubeconfig, tmp_path, port)
    log = tmp_path / "kai-ray.log"
    with log.open("wb") as sink:
        scheduler = subprocess.Popen(
            command,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "POD_NAMESPACE": NAMESPACE, "PYTHONPATH": str(REPO)},
            cwd=REPO,
        )
    try:
        await until_true(lambda: _bound(real, [f"greedy-{i}" for i in range(4)]), timeout=90, every=0.5)
        for i in range(2):
            await real.create(PODS, pod(f"owed-{i}", gpus=8, queue_name="owed"))
        await until_true(lambda: _bound(real, ["owed-0", "owed-1"]), timeout=90, every=0.5)
        placed = await real.placements()
        assert sum(1 for name in placed if name.startswith("greedy-")) == 2  # two were reclaimed

        async def explained() -> bool:
            events = await real.items("/api/v1/namespaces/default/events")
            status = (await real.get(f"{GROUPS}/too-big")).get("status") or {}
            return bool(status.get("schedulingConditions")) and any(
                e["involvedObject"]["name"] == "too-big" for e in events
            )

        await until_true(explained, timeout=60, every=0.5)
        lease = await real.get(f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/kai-ray")
        assert lease["spec"]["holderIdentity"]
    finally:
        scheduler.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.to_thread(scheduler.wait, 30)
        except subprocess.TimeoutExpired:
            scheduler.kill()
            code = scheduler.wait()
    assert code == 0, log.read_text()[-3000:]
    entries = audit_entries(real.real.audit_log, SA_USER, since)
    verbs = {  # (verb, resource, subresource) of every request it made
        (e["verb"], (e.get("objectRef") or {}).get("resource"), (e.get("objectRef") or {}).get("subresource"))
        for e in entries
    }
    assert ("create", "pods", "binding") in verbs and ("create", "pods", "eviction") in verbs
    assert ("update", "leases", None) in verbs or ("create", "leases", None) in verbs
    assert ("patch", "podgroups", "status") in verbs and ("create", "events", None) in verbs
    assert forbidden(entries) == [], yaml.safe_dump(forbidden(entries))


async def _bound(real: Backend, names: list[str]) -> bool:
    placed = await real.placements()
    return all(placed.get(name) for name in names)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("DELETE", f"{PODS}/victim", None),  # eviction.mode=eviction grants pods/eviction, not delete
        ("POST", QUEUES, queue("mine")),  # queues are read, never written
        ("GET", "/api/v1/namespaces/default/secrets", None),
        ("DELETE", f"{GROUPS}/victim", None),  # PodGroups are created and patched, never deleted
    ],
    ids=["delete-pod", "create-queue", "list-secrets", "delete-podgroup"],
)
async def test_an_operation_the_chart_does_not_grant_is_refused(
    real: Backend, method: str, path: str, body: dict[str, Any] | None
) -> None:
    assert real.real is not None
    _, account = await apply_chart(real)
    await real.create(PODS, pod("victim", gpus=1))
    since = audit_size(real.real.audit_log)
    api = await connect(str(real.real.kubeconfig(token=await service_account_token(real, account), name="kai-ray-sa")))
    try:
        with pytest.raises(KubeError) as refused:
            await api.request(
                method,
                path,
                body=body,
                content_type="application/merge-patch+json" if method == "PATCH" else "application/json",
            )
        assert refused.value.status == 403
        assert SA_USER in str(refused.value.body.get("message"))
    finally:
        await api.close()
    assert len(forbidden(audit_entries(real.real.audit_log, SA_USER, since))) == 1  # the audit log sees refusals
