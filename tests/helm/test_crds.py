"""The chart's Queue and PodGroup CRDs: the kinds kai-ray watches, and KAI's manifests apply unchanged."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from devcluster.crds import KAI_CRDS
from k8s_adapter.api import Response
from k8s_adapter.kinds import POD_GROUPS, QUEUES
from k8s_adapter.status import STATUS_KEYS, StatusWriter
from pod_grouper.live import PodGrouper
from tests.adapter.fake_api import FakeApi, ok
from tests.adapter.status_scenario import scenario
from tests.helm.chart import REPO, crd_named, crd_version, custom_resource_problems, manifests_in

# Manifests as KAI users write them (KAI's docs and examples): a two-level queue tree with
# quotas, limits and weights, and pod groups using every spec field KAI v0.17 knows.
KAI_MANIFESTS = """
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: research
spec:
  displayName: Research department
  priority: 200
  resources:
    gpu: {quota: 16, limit: 24, overQuotaWeight: 2}
    cpu: {quota: 64000, limit: -1, overQuotaWeight: 1}
    memory: {quota: 512000, limit: -1, overQuotaWeight: 1}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: team-vision
  labels: {kai.scheduler/node-pool: a100}
spec:
  parentQueue: research
  preemptMinRuntime: 10m
  reclaimMinRuntime: 5m
  resources:
    gpu: {quota: 2.5, limit: -1, overQuotaWeight: 1}
    cpu: {quota: -1, limit: -1, overQuotaWeight: 0}
    memory: {quota: 0, limit: 0, overQuotaWeight: 1}
status:
  childQueues: []
  allocated: {cpu: "12", memory: 64Gi, nvidia.com/gpu: "2500m"}
  allocatedNonPreemptible: {cpu: "0"}
  requested: {cpu: 16, nvidia.com/gpu: "4"}
  conditions:
    - {type: OverQuota, status: "False", reason: WithinQuota, lastTransitionTime: "2026-03-01T10:00:00Z"}
---
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata:
  name: pg-llama-finetune-0f3c
  namespace: team-vision
  annotations: {kai.scheduler/top-owner-metadata: "{}"}
spec:
  minMember: 4
  queue: team-vision
  priorityClassName: train
  preemptibility: preemptible
  markUnschedulable: true
  schedulingBackoff: 1
  preemptionDelay: 5m
  stalenessGracePeriod: "-1s"
  topologyConstraint: {topology: cluster-topology, requiredTopologyLevel: zone, preferredTopologyLevel: rack}
  subGroups:
    - {name: launcher, minMember: 1}
    - {name: workers, minMember: 3, topologyConstraint: {topology: cluster-topology, preferredTopologyLevel: rack}}
---
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata:
  name: disaggregated-serving
  namespace: serving
spec:
  minSubGroup: 2
  queue: default-queue
  priorityClassName: inference
  preemptibility: non-preemptible
  subGroups:
    - {name: prefill, minSubGroup: 1}
    - {name: prefill-0, parent: prefill, minMember: 2}
    - {name: decode, minMember: 0}
status:
  schedulingConditions:
    - type: UnschedulableOnNodePool
      nodePool: default
      status: "True"
      transitionID: "3"
      lastTransitionTime: "2026-03-01T10:00:00Z"
      reasons:
        - reason: OverLimit
          message: the queue team-vision is over its GPU limit
          details: {queueDetails: {name: team-vision, queueResourceLimits: {nvidia.com/gpu: "24"}}}
  resourcesStatus:
    allocated: {cpu: 500m, memory: 1Gi}
    requested: {nvidia.com/gpu: "8"}
---
apiVersion: kai.scheduler/v1alpha1
kind: Topology
metadata:
  name: cluster-topology
spec:
  levels:
    - {nodeLabel: topology.kubernetes.io/zone, alias: zone}
    - {nodeLabel: example.com/rack, alias: rack}
    - {nodeLabel: kubernetes.io/hostname}
"""

# One mistake each, of the kind a strict apply must refuse.
BROKEN = [
    ("Queue", {"spec": {"resources": {"gpu": {"quota": "ten"}}}}, "'ten' is not of type 'number'"),
    ("Queue", {"spec": {"priority": 1.5}}, "is not of type 'integer'"),
    ("Queue", {"spec": {"parent": "research"}}, "'parent' was unexpected"),
    ("PodGroup", {"spec": {"minMember": -1}}, "less than the minimum of 0"),
    ("PodGroup", {"spec": {"preemptibility": "sometimes"}}, "is not one of"),
    ("PodGroup", {"spec": {"subGroups": [{"minMember": 2}]}}, "'name' is a required property"),
    ("PodGroup", {"spec": {"minMembers": 2}}, "'minMembers' was unexpected"),
    ("Topology", {"spec": {"levels": []}}, "should be non-empty"),
    ("Topology", {"spec": {"levels": [{"alias": "rack"}]}}, "'nodeLabel' is a required property"),
    ("Topology", {"spec": {"levels": [{"nodeLabel": "-bad-"}]}}, "does not match"),
]
API_VERSIONS = {
    "Queue": "scheduling.run.ai/v2",
    "PodGroup": "scheduling.run.ai/v2alpha2",
    "Topology": "kai.scheduler/v1alpha1",
}


def test_the_crds_define_exactly_the_kinds_the_adapter_watches() -> None:
    for kind, crd_name in ((QUEUES, "queues.scheduling.run.ai"), (POD_GROUPS, "podgroups.scheduling.run.ai")):
        spec = crd_named(crd_name)["spec"]
        assert (spec["group"], spec["names"]["plural"], spec["names"]["kind"]) == (kind.group, kind.plural, kind.name)
        assert spec["scope"] == ("Namespaced" if kind.namespaced else "Cluster")
        served = crd_version(crd_named(crd_name), kind.version)
        assert served["served"] and served["storage"] and served["subresources"] == {"status": {}}


@pytest.mark.parametrize("dev", KAI_CRDS, ids=lambda c: c["metadata"]["name"])
def test_the_crds_match_the_dev_clusters_copies_of_kais(dev: dict[str, Any]) -> None:
    chart = crd_named(dev["metadata"]["name"])["spec"]
    assert chart["names"] == dev["spec"]["names"] and chart["scope"] == dev["spec"]["scope"]
    [dev_version] = dev["spec"]["versions"]
    version = crd_version({"spec": chart}, dev_version["name"])
    assert version.get("additionalPrinterColumns", []) == dev_version.get("additionalPrinterColumns", [])


@pytest.mark.parametrize("manifest", list(yaml.safe_load_all(KAI_MANIFESTS)), ids=lambda m: m["metadata"]["name"])
def test_kai_manifests_fit_the_crds_unchanged(manifest: dict[str, Any]) -> None:
    assert custom_resource_problems(manifest) == []


@pytest.mark.parametrize(("kind", "body", "complaint"), BROKEN, ids=[b[2] for b in BROKEN])
def test_a_mistake_in_a_manifest_is_refused(kind: str, body: dict[str, Any], complaint: str) -> None:
    manifest = {"apiVersion": API_VERSIONS[kind], "kind": kind, "metadata": {"name": "x"}, **body}
    problems = custom_resource_problems(manifest)
    assert len(problems) == 1 and complaint in problems[0], problems


def test_the_repositorys_examples_fit_the_crds() -> None:
    found = [
        obj
        for path in sorted((REPO / "examples").glob("*.yaml"))
        for obj in manifests_in(path)
        if obj.get("kind") in API_VERSIONS
    ]
    assert {o["kind"] for o in found} >= {"Queue", "PodGroup"}
    assert [p for obj in found for p in custom_resource_problems(obj)] == []


async def test_what_the_adapter_writes_fits_the_crds() -> None:
    """The PodGroup the pod grouper creates and the status the scheduler explains with."""

    def handler(method: str, path: str, query: object, body: object) -> Response:
        if method == "GET":  # the pod's owner, a PyTorchJob of four pods
            return ok(
                {
                    "apiVersion": "kubeflow.org/v1",
                    "kind": "PyTorchJob",
                    "metadata": {"name": "llama", "uid": "u-1", "labels": {"kai.scheduler/queue": "team-vision"}},
                    "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 3}}},
                }
            )
        return ok()

    api = FakeApi(handler)
    pod = {
        "metadata": {
            "name": "llama-master-0",
            "namespace": "ml",
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v1",
                    "kind": "PyTorchJob",
                    "name": "llama",
                    "uid": "u-1",
                    "controller": True,
                }
            ],
        },
        "spec": {"schedulerName": "kai-scheduler"},
    }
    await PodGrouper(api).group([pod])  # type: ignore[arg-type]
    [created] = [body for method, path, body in api.calls if method == "POST" and path.endswith("/podgroups")]
    assert created["spec"]["minMember"] == 4
    assert custom_resource_problems(created) == []
    outcome, cache = scenario()  # a cycle with a pending group, a running one and a gang not ready
    await StatusWriter(api, report_after=0).publish(outcome, cache)  # type: ignore[arg-type]
    statuses = [(path, body) for method, path, body in api.calls if method == "PATCH" and path.endswith("/status")]
    groups = [body for path, body in statuses if "/podgroups/" in path]
    queues = [body for path, body in statuses if "/queues/" in path]
    assert {"schedulingConditions", "resourcesStatus"} <= {key for body in groups for key in body["status"]}
    assert queues and all(set(body["status"]) == {*STATUS_KEYS, "childQueues"} for body in queues)
    for body in groups:
        assert custom_resource_problems({**created, **body}) == [], body
    queue = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "q"}, "spec": {}}
    for body in queues:
        assert custom_resource_problems({**queue, **body}) == [], body
    condition = next(b for b in groups if "schedulingConditions" in b["status"])["status"]["schedulingConditions"][0]
    assert condition["reasons"][0]["reason"] == "OverLimit"
