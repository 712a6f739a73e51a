"""The chart's roles against what the adapter uses (the grants recorded in rbac.py): exactly those,
the least-privilege core with every option off, and each option adding only its own grants."""

from __future__ import annotations

import pytest

from k8s_adapter.kinds import OWNER_KINDS
from tests.helm.chart import NAMESPACE, one, render
from tests.helm.rbac import CORE, LEASE, VALUE_SETS, adapter_requests, needed, rendered_grants, reservation_grants


@pytest.mark.parametrize("name", VALUE_SETS)
def test_the_roles_grant_exactly_what_the_adapter_uses(name: str) -> None:
    values = VALUE_SETS[name]
    assert rendered_grants(values) == needed(values)


def test_with_every_option_off_the_cluster_role_is_the_least_privilege_core() -> None:
    cluster, namespaced = rendered_grants(VALUE_SETS["every-option-off"])
    assert cluster == CORE and namespaced == set()
    assert rendered_grants({})[1] == LEASE


def test_the_default_install_adds_only_the_pod_grouper_to_the_least_privilege_list() -> None:
    """The pod grouper is on by default, as KAI's is; everything else optional is off."""
    cluster, namespaced = rendered_grants({})
    grouper = cluster - CORE
    assert cluster >= CORE and namespaced == LEASE
    assert grouper == rendered_grants({**VALUE_SETS["every-option-off"], "podGrouper": {"enabled": True}})[0] - CORE
    assert {("scheduling.run.ai", "podgroups", "create"), ("", "pods", "patch")} <= grouper


def test_each_option_adds_only_its_own_grants() -> None:
    core, _ = rendered_grants(VALUE_SETS["every-option-off"])
    base = VALUE_SETS["every-option-off"]
    assert rendered_grants({**base, "eviction": {"mode": "delete"}})[0] ^ core == {
        ("", "pods", "delete"),
        ("", "pods/eviction", "create"),
    }
    assert rendered_grants({**base, "gpuSharing": {"enabled": True}})[0] - core == {
        ("", "pods", "patch"),
        ("", "pods", "delete"),
        *(("", "configmaps", v) for v in ("get", "create", "patch", "delete")),
    }
    assert rendered_grants({**base, "dra": {"enabled": True}})[0] - core == {
        *(
            ("resource.k8s.io", r, v)
            for r in ("resourceslices", "deviceclasses", "resourceclaims")
            for v in ("get", "list", "watch")
        ),
        ("resource.k8s.io", "resourceclaims/status", "update"),
    }
    grouper = rendered_grants({**base, "podGrouper": {"enabled": True}})[0] - core
    assert {("scheduling.run.ai", "podgroups", "create"), ("", "pods", "patch")} <= grouper
    assert {r for g, r, v in grouper if v == "get"} == {kind.plural for kind in OWNER_KINDS.values()}


def test_the_bindings_give_the_roles_to_the_schedulers_service_account() -> None:
    objects = [o for o in render() if "helm.sh/hook" not in o["metadata"].get("annotations", {})]
    account = one(objects, "ServiceAccount")["metadata"]
    pod_account = one(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
    assert pod_account == account["name"]
    for binding_kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding, role = one(objects, binding_kind), one(objects, role_kind)
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role_kind,
            "name": role["metadata"]["name"],
        }
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
        ]
    assert one(objects, "Role")["metadata"]["namespace"] == NAMESPACE  # leases only where the scheduler runs


def test_reservation_pods_are_created_only_in_their_namespace_and_annotate_only_themselves() -> None:
    values = {"gpuSharing": {"enabled": True}}
    cluster, _ = rendered_grants(values)
    assert ("", "pods", "create") not in cluster
    by_account = reservation_grants(values)
    account = one(render(values), "ServiceAccount", "kai-ray")["metadata"]["name"]
    assert by_account[account] == set(adapter_requests()["share-reservations"]) == {("", "pods", "create")}
    assert by_account["kai-resource-reservation"] == {("", "pods", "get"), ("", "pods", "patch")}
    assert reservation_grants({}) == {}
