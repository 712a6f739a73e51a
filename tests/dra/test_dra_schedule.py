"""DRA through ``kai-ray schedule``: KAI's docs/dra/ example and the cases its plugin decides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests import manifests as m
from tests.cli.conftest import RunCli
from tests.conftest import REPO
from tests.dra import manifests as d

NOW = "2026-01-03T00:00:00Z"
MEMORY_40GI = f"device.capacity['{d.GPU_DRIVER}'].memory.compareTo(quantity('40Gi')) >= 0"


def schedule(kai_ray: RunCli, path: Path) -> Any:
    result = kai_ray("schedule", "--snapshot", path, "--now", NOW, "-o", "json")
    assert result.code == 0, result.err
    return result.json()


def decide(kai_ray: RunCli, tmp_path: Path, objects: list[m.Manifest]) -> Any:
    return schedule(kai_ray, m.write(tmp_path / "snapshot.yaml", objects))


def gpu_cluster(*nodes: tuple[str, int, int]) -> list[m.Manifest]:
    """Nodes whose GPUs only DRA publishes (no device plugin): (name, devices, GiB each)."""
    out: list[m.Manifest] = [m.queue("q"), d.gpu_class()]
    for name, count, gib in nodes:
        out += [m.node(name, gpu=0), d.gpu_slice(name, count, gib)]
    return out


def test_kais_imex_channel_example_binds_with_the_channel_its_template_asks_for(kai_ray: RunCli) -> None:
    out = schedule(kai_ray, REPO / "examples" / "dra" / "gpu-imex-pod.yaml")
    pod = out["pods"]["default/gpu-imex-pod"]
    assert pod["status"] == "Binding" and pod["node"] == "gb200-node-0"
    assert pod["claims"] == {"gpu-imex-pod-imex-channel-0": ["compute-domain.nvidia.com/gb200-node-0/channel-0"]}


def test_a_second_imex_pod_waits_and_names_the_claim_that_found_no_free_channel(
    kai_ray: RunCli, tmp_path: Path
) -> None:
    import yaml

    example = yaml.safe_load((REPO / "examples" / "dra" / "gpu-imex-pod.yaml").read_text())["items"]
    pod = next(o for o in example if o["kind"] == "Pod")
    second = {**pod, "metadata": {**pod["metadata"], "name": "second-imex-pod"}}
    out = decide(kai_ray, tmp_path, [*example, second])
    statuses = {k: v["status"] for k, v in out["pods"].items()}
    assert sorted(statuses.values()) == ["Binding", "Pending"]
    [waiting] = [v for v in out["pods"].values() if v["status"] == "Pending"]
    assert "no free device for claim imex-channel-0, request channel" in waiting["reason"]
    assert "compute-domain-default-channel.nvidia.com" in waiting["reason"]


def test_a_cel_selector_picks_only_the_devices_with_enough_memory(kai_ray: RunCli, tmp_path: Path) -> None:
    objects = gpu_cluster(("small", 8, 24), ("big", 2, 80))
    objects += [
        d.claim("c", d.request("gpu", 2, d.GPU_CLASS, MEMORY_40GI)),
        d.with_claims(m.pod("p", "q"), {"gpu": "c"}),
    ]
    pod = decide(kai_ray, tmp_path, objects)["pods"]["team/p"]
    assert pod["node"] == "big"
    assert pod["claims"] == {"c": [f"{d.GPU_DRIVER}/big/gpu-0", f"{d.GPU_DRIVER}/big/gpu-1"]}


def test_a_claim_no_node_can_allocate_keeps_its_pod_pending_with_the_request_named(
    kai_ray: RunCli, tmp_path: Path
) -> None:
    objects = gpu_cluster(("small", 8, 24))
    objects += [
        d.claim("c", d.request("big-gpu", 1, d.GPU_CLASS, MEMORY_40GI)),
        d.with_claims(m.pod("p", "q"), {"gpu": "c"}),
    ]
    pod = decide(kai_ray, tmp_path, objects)["pods"]["team/p"]
    assert pod["status"] == "Pending"
    assert "no free device for claim gpu, request big-gpu (1 × gpu.nvidia.com)" in pod["reason"]


def test_a_claim_with_constraints_kai_ray_cannot_evaluate_waits_and_says_so(kai_ray: RunCli, tmp_path: Path) -> None:
    """Never drop meaning: a matchAttribute constraint ignored could hand out GPUs on different NVLink
    domains; the claim waits, naming the field, and an unconstrained neighbour still binds."""
    constrained = d.claim("c", d.request("gpu", 2))
    constrained["spec"]["devices"]["constraints"] = [{"requests": ["gpu"], "matchAttribute": "gpu.nvidia.com/uuid"}]
    objects = gpu_cluster(("n", 8, 80))
    objects += [
        constrained,
        d.with_claims(m.pod("p", "q"), {"gpu": "c"}),
        d.claim("plain", d.request("gpu", 1)),
        d.with_claims(m.pod("other", "q"), {"gpu": "plain"}),
    ]
    pods = decide(kai_ray, tmp_path, objects)["pods"]
    assert pods["team/p"]["status"] == "Pending"
    assert "spec.devices.constraints, which kai-ray does not honour yet" in pods["team/p"]["reason"]
    assert pods["team/other"]["status"] == "Binding"


def test_dra_gpus_count_toward_the_queue_and_its_limit(kai_ray: RunCli, tmp_path: Path) -> None:
    limited = {
        "gpu": {"quota": 2, "limit": 2, "overQuotaWeight": 1},
        **{r: m.UNLIMITED_RESOURCES[r] for r in ("cpu", "memory")},
    }
    objects = [m.queue("q", resources=limited), d.gpu_class(), m.node("n", gpu=0), d.gpu_slice("n", 8)]
    for name in ("a", "b"):
        objects += [
            d.template(f"t-{name}", d.request("gpu", 2)),
            d.with_claims(m.pod(name, "q"), templates={"gpu": f"t-{name}"}),
        ]
    out = decide(kai_ray, tmp_path, objects)
    statuses = sorted(v["status"] for v in out["pods"].values())
    assert statuses == ["Binding", "Pending"]
    assert out["queues"]["q"]["allocated"]["gpu"] == 2
    [waiting] = [v for v in out["pods"].values() if v["status"] == "Pending"]
    assert "OverLimit" in waiting["reason"] or "limit" in waiting["reason"]


def test_a_shared_claim_puts_its_pods_on_one_node_and_counts_its_gpus_once(kai_ray: RunCli, tmp_path: Path) -> None:
    objects = gpu_cluster(("n1", 8, 80), ("n2", 8, 80))
    objects.append(d.claim("shared", d.request("gpu", 2), labels={"kai.scheduler/queue": "q"}))
    objects.append(m.pod_group("pg", "q", min_member=2))
    for name in ("a", "b"):
        objects.append(d.with_claims(m.pod(name, "q", group="pg"), {"gpu": "shared"}))
    out = decide(kai_ray, tmp_path, objects)
    a, b = out["pods"]["team/a"], out["pods"]["team/b"]
    assert a["status"] == b["status"] == "Binding" and a["node"] == b["node"]
    assert out["queues"]["q"]["allocated"]["gpu"] == 2  # one claim of two GPUs, two pods


def test_a_shared_gpu_claim_without_the_queue_label_is_refused_as_kai_does(kai_ray: RunCli, tmp_path: Path) -> None:
    objects = gpu_cluster(("n1", 8, 80))
    objects += [d.claim("shared", d.request("gpu", 1), labels={}), d.with_claims(m.pod("a", "q"), {"gpu": "shared"})]
    pod = decide(kai_ray, tmp_path, objects)["pods"]["team/a"]
    assert pod["status"] == "Pending"
    assert "ResourceClaim shared is a shared GPU claim and needs the label kai.scheduler/queue=q" in pod["reason"]


def test_an_allocated_claim_ties_its_new_user_to_the_claims_node(kai_ray: RunCli, tmp_path: Path) -> None:
    objects = gpu_cluster(("n1", 8, 80), ("n2", 8, 80))
    objects.append(
        d.claim(
            "held",
            d.request("gpu", 1),
            labels={"kai.scheduler/queue": "q"},
            allocated=("n2", ["gpu-3"]),
            reserved_for=["old"],
        )
    )
    objects.append(d.with_claims(m.pod("old", "q", node_name="n2", phase="Running"), {"gpu": "held"}))
    objects.append(d.with_claims(m.pod("new", "q"), {"gpu": "held"}))
    out = decide(kai_ray, tmp_path, objects)
    assert out["pods"]["team/new"]["node"] == "n2" and "claims" not in out["pods"]["team/new"]
    assert out["queues"]["q"]["allocated"]["gpu"] == 1


def test_devices_held_by_allocated_claims_are_not_given_again(kai_ray: RunCli, tmp_path: Path) -> None:
    objects = gpu_cluster(("n1", 2, 80))
    objects.append(d.claim("held", d.request("gpu", 1), allocated=("n1", ["gpu-0"])))
    objects += [d.claim("mine", d.request("gpu", 1)), d.with_claims(m.pod("p", "q"), {"gpu": "mine"})]
    pod = decide(kai_ray, tmp_path, objects)["pods"]["team/p"]
    assert pod["claims"] == {"mine": [f"{d.GPU_DRIVER}/n1/gpu-1"]}


def test_missing_claims_templates_and_classes_are_reasons_not_errors(kai_ray: RunCli, tmp_path: Path) -> None:
    objects = gpu_cluster(("n1", 8, 80))
    objects += [
        d.with_claims(m.pod("no-claim", "q"), {"gpu": "absent"}),
        d.with_claims(m.pod("no-template", "q"), templates={"gpu": "absent"}),
        d.claim("odd", d.request("gpu", 1, "no-such-class")),
        d.with_claims(m.pod("no-class", "q"), {"gpu": "odd"}),
    ]
    pods = decide(kai_ray, tmp_path, objects)["pods"]
    assert "ResourceClaim absent does not exist" in pods["team/no-claim"]["reason"]
    assert "ResourceClaimTemplate absent" in pods["team/no-template"]["reason"]
    assert "DeviceClass no-such-class does not exist" in pods["team/no-class"]["reason"]


def test_preemption_frees_a_victims_device_for_the_preemptor_which_waits_until_it_is_given_back(
    kai_ray: RunCli, tmp_path: Path
) -> None:
    objects = gpu_cluster(("n1", 1, 80))
    objects += [m.priority_class("low", 50), m.priority_class("high", 125)]
    objects.append(d.claim("victim-gpu", d.request("gpu", 1), allocated=("n1", ["gpu-0"]), reserved_for=["victim"]))
    victim = m.pod("victim", "q", node_name="n1", phase="Running", priority_class_name="low")
    objects.append(d.with_claims(victim, {"gpu": "victim-gpu"}))
    objects += [d.template("t", d.request("gpu", 1))]
    objects.append(d.with_claims(m.pod("urgent", "q", priority_class_name="high"), templates={"gpu": "t"}))
    out = decide(kai_ray, tmp_path, objects)
    assert out["pods"]["team/victim"]["status"] == "Releasing"
    urgent = out["pods"]["team/urgent"]
    # The device is the victim's until its pod is gone: the preemptor waits for it, not bound now.
    assert urgent["status"] == "Pipelined" and urgent["node"] == "n1"


def test_evicting_the_pod_a_shared_claim_was_charged_to_keeps_its_gpus_counted_once(
    kai_ray: RunCli, tmp_path: Path
) -> None:
    objects = [m.queue("q"), d.gpu_class(), m.node("n1", gpu=0, cpu="2"), d.gpu_slice("n1", 2)]
    objects += [m.priority_class("low", 50), m.priority_class("mid", 75), m.priority_class("high", 125)]
    objects.append(
        d.claim("shared", d.request("gpu", 2), allocated=("n1", ["gpu-0", "gpu-1"]), reserved_for=["a", "b"])
    )
    for name, level in (("a", "low"), ("b", "mid")):  # "a" pays for the claim (first user by name)
        pod = m.pod(name, "q", node_name="n1", phase="Running", priority_class_name=level)
        objects.append(d.with_claims(pod, {"gpu": "shared"}))
    objects.append(m.pod("urgent", "q", priority_class_name="high"))
    out = decide(kai_ray, tmp_path, objects)
    assert out["pods"]["team/a"]["status"] == "Releasing" and out["pods"]["team/b"]["status"] == "Running"
    assert out["pods"]["team/urgent"]["status"] == "Pipelined"
    assert out["queues"]["q"]["allocated"]["gpu"] == 2  # b still uses the claim's two GPUs
