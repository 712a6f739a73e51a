"""The chart renders, every object it renders would be accepted, and kai-ray accepts what it is given."""

from __future__ import annotations

from typing import Any

import helm_python
import pytest
import yaml

from kai_ray.app.cli.main import build_parser
from kai_ray.io.config import config_from_mapping
from tests.helm.chart import (
    CHART,
    KUBE_VERSIONS,
    MONITORING_API,
    NAMESPACE,
    RELEASE,
    crds,
    one,
    problems_of,
    render,
    structural_problems,
)

# Value sets a user would plausibly install with: the defaults and the switches that change
# which objects exist or how the scheduler runs.
VALUE_SETS: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "defaults": ({}, ()),
    "service-monitor": ({"serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}}}, (MONITORING_API,)),
    "external-ray": ({"ray": {"mode": "external", "address": "ray://ray-head.ray:10001"}}, ()),
    "kuberay": (
        {
            "ray": {"mode": "kuberay", "kuberay": {"head": {"rayStartParams": {"object-store-memory": "1e9"}}}},
            "imagePullSecrets": [{"name": "registry"}],
            "tolerations": [{"operator": "Exists"}],
        },
        (),
    ),
    "single-replica-minimal": (
        {
            "replicas": 1,
            "leaderElection": {"enabled": False},
            "defaultQueues": {"enabled": False},
            "defaultPriorityClasses": {"enabled": False},
            "podGrouper": {"enabled": False},
            "podDisruptionBudget": {"enabled": False},
        },
        (),
    ),
    "delete-eviction-and-fractions": (
        {
            "eviction": {"mode": "delete"},
            "gpuSharing": {"enabled": True},
            "scheduler": {"shards": 4, "verbose": True, "extraArgs": ["--period=0.5"]},
        },
        (),
    ),
    "own-service-account": (
        {
            "serviceAccount": {"create": False, "name": "scheduler"},
            "rbac": {"create": False},
            "priorityClassName": "system-cluster-critical",
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"}
                                ]
                            }
                        ]
                    }
                }
            },
            "scheduler": {
                "config": {"placementStrategy": {"gpu": "spread", "cpu": "spread"}, "kValue": 0, "shards": 2}
            },
        },
        (),
    ),
}


def rendered(name: str) -> list[dict[str, Any]]:
    values, api_versions = VALUE_SETS[name]
    return render(values, api_versions=api_versions)


def scheduler_container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    [container] = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return container


@pytest.mark.parametrize("name", VALUE_SETS)
def test_every_rendered_object_would_be_accepted(name: str) -> None:
    objects = rendered(name)
    assert objects
    assert problems_of(objects) == []


@pytest.mark.parametrize("name", ["defaults", "kuberay"])
def test_helm_lint_finds_nothing_to_warn_about(name: str) -> None:
    report = helm_python.lint(
        str(CHART), VALUE_SETS[name][0], strict=True, namespace=NAMESPACE, kube_version=f"v{KUBE_VERSIONS[0]}"
    )
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []  # 2 = warning, 3 = error


def test_the_crds_are_valid_structural_definitions() -> None:
    definitions = crds()
    assert sorted(c["metadata"]["name"] for c in definitions) == [
        "podgroups.scheduling.run.ai",
        "queues.scheduling.run.ai",
        "topologies.kai.scheduler",
    ]
    assert problems_of(definitions) == []
    for crd in definitions:
        for version in crd["spec"]["versions"]:
            assert structural_problems(version["schema"]["openAPIV3Schema"]) == [], crd["metadata"]["name"]


def test_a_broken_object_is_reported() -> None:
    """The validation above can fail: a typo in a Deployment and a non-structural schema are caught."""
    deployment = one(render(), "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessprobe"] = {}
    assert any("livenessprobe" in p for p in problems_of([deployment]))
    assert structural_problems({"type": "object", "properties": {"spec": {"properties": {}}}}) == ["/spec: no type"]


@pytest.mark.parametrize("name", VALUE_SETS)
def test_kai_ray_accepts_the_command_line_and_the_config(name: str) -> None:
    objects = rendered(name)
    container = scheduler_container(objects)
    args = build_parser().parse_args(container["args"])  # an unknown flag exits here
    assert args.command == "run"
    mount = next(m for m in container["volumeMounts"] if m["name"] == "config")
    assert args.config.startswith(mount["mountPath"] + "/")
    config_map = one(objects, "ConfigMap")
    config_text = config_map["data"][args.config.rsplit("/", 1)[1]]
    config = config_from_mapping(yaml.safe_load(config_text), "chart config")  # unknown keys raise
    assert config.schedulerName == VALUE_SETS[name][0].get("scheduler", {}).get("config", {}).get(
        "schedulerName", "kai-scheduler"
    )
    [port] = container["ports"]
    assert port["name"] == "http-metrics" and port["containerPort"] == args.metrics_port
    assert args.leader_elect == (name != "single-replica-minimal")


def test_the_defaults_run_two_leader_elected_replicas_that_evict_politely() -> None:
    objects = render()
    deployment = one(objects, "Deployment")
    args = build_parser().parse_args(scheduler_container(objects)["args"])
    assert deployment["spec"]["replicas"] == 2
    assert args.leader_elect and args.lease_name == "kai-ray" and args.eviction_mode == "eviction"
    env = {e["name"]: e for e in scheduler_container(objects)["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert "RAY_ADDRESS" not in env  # embedded Ray
    assert one(objects, "PodDisruptionBudget")["spec"]["minAvailable"] == 1


@pytest.mark.parametrize("grouper", [False, True])
def test_the_scheduler_only_does_what_its_role_grants(grouper: bool) -> None:
    """The pod grouper is switched on exactly when the ClusterRole grants its writes (kube-apiserver's
    RBAC refused them otherwise: tests/e2e/test_rbac.py); pods/status, for the DisruptionTarget mark,
    is always granted."""
    objects = render({"podGrouper": {"enabled": grouper}})
    args = build_parser().parse_args(scheduler_container(objects)["args"])
    assert (args.pod_grouper, args.mark_disruption_target) == (grouper, True)
    rules = one(objects, "ClusterRole", RELEASE)["rules"]
    assert any("pods/status" in r["resources"] and "patch" in r["verbs"] for r in rules)


def test_probes_use_the_health_endpoints_of_the_metrics_port() -> None:
    container = scheduler_container(render())
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http-metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http-metrics"}


def test_the_metrics_service_selects_only_scheduler_pods_and_asks_to_be_scraped() -> None:
    objects = rendered("kuberay")
    service = one(objects, "Service")
    [port] = service["spec"]["ports"]
    assert port["name"] == "http-metrics" and port["targetPort"] == "http-metrics"
    annotations = service["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/port"] == str(port["port"])
    selector = service["spec"]["selector"].items()
    scheduler_pods = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert selector <= scheduler_pods.items()
    ray = one(objects, "RayCluster")["spec"]
    for template in [ray["headGroupSpec"]["template"]] + [g["template"] for g in ray["workerGroupSpecs"]]:
        assert not selector <= template["metadata"]["labels"].items(), "a Ray pod would receive scrapes"


def test_pods_run_unprivileged_on_a_read_only_root_filesystem() -> None:
    objects = rendered("kuberay")
    deployment_pod = one(objects, "Deployment")["spec"]["template"]
    ray = one(objects, "RayCluster")["spec"]
    for template in [deployment_pod, ray["headGroupSpec"]["template"], ray["workerGroupSpecs"][0]["template"]]:
        assert template["spec"]["securityContext"]["runAsNonRoot"] is True
        for container in template["spec"]["containers"]:
            security = container["securityContext"]
            assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
            assert security["capabilities"]["drop"] == ["ALL"]
            assert "/tmp" in {m["mountPath"] for m in container["volumeMounts"]}  # Ray and Python write there


def test_a_config_change_rolls_the_scheduler_pods() -> None:
    def checksum(values: dict[str, Any]) -> str:
        return str(one(render(values), "Deployment")["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    assert checksum({}) == checksum({"replicas": 3})
    assert checksum({}) != checksum({"scheduler": {"config": {"kValue": 0.5}}})


def test_everything_namespaced_lands_in_the_release_namespace() -> None:
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding", "PriorityClass", "Queue"}
    for obj in rendered("kuberay") + rendered("service-monitor"):
        if obj["kind"] in cluster_scoped:
            assert "namespace" not in obj["metadata"], obj["kind"]
        else:
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["kind"]
