"""Each value switches what its comment in values.yaml says it switches, and nothing else."""

from __future__ import annotations

from typing import Any

import pytest
from helm_python import HelmRenderError

from kai_ray import labels as L
from tests.helm.chart import MONITORING_API, NAMESPACE, find, one, problems_of, render


def kinds(objects: list[dict[str, Any]]) -> set[str]:
    return {o["kind"] for o in objects}


def env_of(objects: list[dict[str, Any]]) -> dict[str, Any]:
    [container] = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value") for e in container["env"]}


@pytest.mark.parametrize("api_served", [True, False], ids=["cluster-serves-the-api", "offline-render"])
@pytest.mark.parametrize("enabled", [True, False])
def test_a_service_monitor_is_rendered_whenever_enabled_even_offline(enabled: bool, api_served: bool) -> None:
    """`helm template` and GitOps renderers see no cluster: the monitor must not depend on what it serves."""
    objects = render({"serviceMonitor": {"enabled": enabled}}, api_versions=[MONITORING_API] if api_served else [])
    assert len(find(objects, "ServiceMonitor")) == (1 if enabled else 0)
    assert problems_of(find(objects, "ServiceMonitor")) == []


def test_the_service_monitor_scrapes_the_metrics_service() -> None:
    objects = render({"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}})  # offline, as helm template
    monitor, service = one(objects, "ServiceMonitor"), one(objects, "Service")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= {p["name"] for p in service["spec"]["ports"]}


def test_default_queues_are_kais_pair_and_can_be_switched_off() -> None:
    queues = {q["metadata"]["name"]: q["spec"] for q in find(render(), "Queue")}
    assert set(queues) == {L.DEFAULT_PARENT_QUEUE, L.DEFAULT_QUEUE}
    assert "parentQueue" not in queues[L.DEFAULT_PARENT_QUEUE]
    assert queues[L.DEFAULT_QUEUE]["parentQueue"] == L.DEFAULT_PARENT_QUEUE
    kais_defaults = {"quota": 0, "limit": -1, "overQuotaWeight": 1}
    for spec in queues.values():
        assert spec["resources"] == {resource: kais_defaults for resource in ("cpu", "gpu", "memory")}
    assert find(render({"defaultQueues": {"enabled": False}}), "Queue") == []


def test_kais_priority_classes_and_their_preemptibility_can_be_switched_off() -> None:
    classes = {c["metadata"]["name"]: c for c in find(render(), "PriorityClass")}
    assert {name: c["value"] for name, c in classes.items()} == {
        "train": 50,
        "build-preemptible": 75,
        "build": 100,
        "inference": 125,
    }
    preemptible = {name for name, c in classes.items() if c["value"] < L.PREEMPTIBLE_BELOW}
    assert preemptible == {"train", "build-preemptible"}
    assert not any(c["globalDefault"] for c in classes.values())
    assert find(render({"defaultPriorityClasses": {"enabled": False}}), "PriorityClass") == []


def test_embedded_ray_gets_shared_memory_and_no_address() -> None:
    objects = render()
    assert "RAY_ADDRESS" not in env_of(objects) and not find(objects, "RayCluster")
    volumes = {v["name"]: v for v in one(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"


def test_an_external_ray_cluster_is_reached_through_ray_address() -> None:
    objects = render({"ray": {"mode": "external", "address": "ray://head.ray:10001"}})
    assert env_of(objects)["RAY_ADDRESS"] == "ray://head.ray:10001"
    assert not find(objects, "RayCluster")
    with pytest.raises(HelmRenderError, match="ray.address is required"):
        render({"ray": {"mode": "external"}})


def test_kuberay_mode_renders_a_ray_cluster_the_scheduler_connects_to() -> None:
    objects = render({"ray": {"mode": "kuberay", "kuberay": {"workers": {"replicas": 3}}}})
    cluster = one(objects, "RayCluster")
    name = cluster["metadata"]["name"]
    # KubeRay names the head Service <cluster>-head-svc; 10001 is the Ray Client port.
    assert env_of(objects)["RAY_ADDRESS"] == f"ray://{name}-head-svc.{NAMESPACE}.svc:10001"
    head = cluster["spec"]["headGroupSpec"]
    assert {"name": "client", "containerPort": 10001} in head["template"]["spec"]["containers"][0]["ports"]
    assert head["rayStartParams"]["num-cpus"] == "0"  # shard actors go to the workers
    [workers] = cluster["spec"]["workerGroupSpecs"]
    assert workers["replicas"] == 3
    scheduler_image = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
    assert workers["template"]["spec"]["containers"][0]["image"] == scheduler_image


def test_one_replica_without_leader_election_needs_no_lease() -> None:
    objects = render({"replicas": 1, "leaderElection": {"enabled": False}})
    [container] = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert "--leader-elect" not in container["args"]
    assert not find(objects, "Role") and not find(objects, "PodDisruptionBudget")


def test_an_existing_service_account_is_used_and_no_rbac_is_rendered() -> None:
    rendered = render({"serviceAccount": {"create": False, "name": "scheduler"}, "rbac": {"create": False}})
    assert one(rendered, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "scheduler"
    objects = [o for o in rendered if "helm.sh/hook" not in o["metadata"].get("annotations", {})]
    assert kinds(objects).isdisjoint({"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"})
    hooks = [o for o in rendered if o not in objects]  # the CRD upgrader's own account, without roles
    assert sorted(o["kind"] for o in hooks) == ["Job", "ServiceAccount"]


def test_image_and_resources_come_from_values() -> None:
    resources = {"requests": {"cpu": "4", "memory": "8Gi"}, "limits": {"memory": "16Gi"}}
    objects = render(
        {
            "image": {"repository": "registry.example/kai-ray", "tag": "1.2.3", "pullPolicy": "Always"},
            "resources": resources,
        }
    )
    [container] = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example/kai-ray:1.2.3" and container["imagePullPolicy"] == "Always"
    assert container["resources"] == resources
    [default] = one(render(), "Deployment")["spec"]["template"]["spec"]["containers"]
    assert default["image"].endswith(":0.1.0")  # the chart's appVersion


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicas": 3, "leaderElection": {"enabled": False}}, "needs leaderElection.enabled"),
        ({"eviction": {"mode": "drain"}}, "eviction.mode must be"),
        ({"ray": {"mode": "cloud"}}, "ray.mode must be"),
        ({"serviceAccount": {"create": False}}, "serviceAccount.name must name"),
    ],
)
def test_unsafe_or_unknown_settings_are_refused_at_render_time(values: dict[str, Any], message: str) -> None:
    with pytest.raises(HelmRenderError, match=message):
        render(values)


def test_raising_a_request_above_the_default_limit_is_reported() -> None:
    """Helm merges resource maps with the defaults, so the default memory limit stays unless replaced."""
    objects = render({"resources": {"requests": {"memory": "8Gi"}}})
    assert problems_of(objects) == ["Deployment kai-ray container scheduler: memory request 8Gi is above its limit 4Gi"]
    assert problems_of(render({"resources": {"requests": {"memory": "8Gi"}, "limits": {"memory": None}}})) == []
