"""The pieces of realcluster that need no Go: the PKI, kwok's stages, the build cache key."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from realcluster import build, kwok
from realcluster import kai as kai_module
from realcluster.cluster import ClusterOptions, RealCluster
from realcluster.pki import make_pki


def test_the_serving_certificate_is_the_cas_and_names_loopback_and_the_service(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    serving = x509.load_pem_x509_certificate(pki.serving_cert.read_bytes())
    serving.verify_directly_issued_by(ca)  # raises when the signature does not check out
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "kubernetes.default.svc" in names.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1", "10.96.0.1"]
    for secret in (pki.serving_key, pki.sa_key, pki.token_file):
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600


def test_each_identity_has_its_own_token_line(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    lines = pki.token_file.read_text().splitlines()
    assert len(lines) == len(pki.identities) == len({line.split(",")[0] for line in lines})
    admin = next(line for line in lines if line.startswith(pki.token("admin") + ","))
    assert admin.endswith(',"system:masters"')
    assert make_pki(tmp_path / "other").token("admin") != pki.token("admin")  # fresh per cluster


def test_kwoks_stages_cover_the_pod_lifecycle_and_optionally_heartbeats(tmp_path: Path) -> None:
    path = kwok.write_config(tmp_path / "kwok.yaml", heartbeat_seconds=10)
    stages = {s["metadata"]["name"]: s for s in yaml.safe_load_all(path.read_text())}
    assert set(stages) == {"pod-start", "pod-finish-succeeded", "pod-finish-failed", "pod-remove", "node-heartbeat"}
    finish = stages["pod-finish-failed"]["spec"]
    keys = {e["key"]: e for e in finish["selector"]["matchExpressions"]}
    assert keys[f'.metadata.annotations["{kwok.RUN_SECONDS}"]']["operator"] == "Exists"
    assert finish["delay"]["durationFrom"]["expressionFrom"].endswith('+ "s")')
    assert "phase: Failed" in finish["next"]["statusTemplate"]
    assert "node-heartbeat" not in {s["metadata"]["name"] for s in kwok.stages(None)}


def test_the_cache_key_follows_the_pins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(build.GO_DIR, tmp_path / "go")
    monkeypatch.setattr(build, "GO_DIR", tmp_path / "go")
    before = build.cache_key("go1.26.8 linux amd64")
    assert build.cache_key("go1.26.9 linux amd64") != before
    (tmp_path / "go" / "kwok" / "go.sum").write_text("changed\n")
    assert build.cache_key("go1.26.8 linux amd64") != before
    assert build.pinned_versions() == {
        "k8s.io/kubernetes": "v1.34.2",
        "go.etcd.io/etcd/server/v3": "v3.6.5",
        "sigs.k8s.io/kwok": "v0.8.0",
    }


def test_the_binary_a_major_version_path_builds_is_named_after_the_element_before(tmp_path: Path) -> None:
    assert build._default_name("go.etcd.io/etcd/server/v3") == "server"
    assert build._default_name("k8s.io/kubernetes/cmd/kube-apiserver") == "kube-apiserver"
    assert build._default_name("./podgroupcontroller") == "podgroupcontroller"


def test_kais_binaries_have_a_cache_key_of_their_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(build.GO_DIR, tmp_path / "go")
    monkeypatch.setattr(build, "GO_DIR", tmp_path / "go")
    version = "go1.26.8 linux amd64"
    control_plane, kai = build.cache_key(version), build.cache_key(version, build.KAI)
    assert kai != control_plane
    wrapper = tmp_path / "go" / "kai" / "podgroupcontroller" / "main.go"
    wrapper.write_text(wrapper.read_text() + "\n// changed\n")
    assert build.cache_key(version, build.KAI) != kai  # the module's own Go sources count
    assert build.cache_key(version) == control_plane  # and leave the control plane's binaries alone
    assert build.pinned_versions(build.KAI) == {
        "github.com/NVIDIA/KAI-scheduler": "v0.12.0",
        "k8s.io/kubernetes": "v1.34.2",
    }
    assert {t.name for t in build.KAI.targets} == set(kai_module.COMPONENTS)


def test_kais_components_get_the_operators_arguments_and_loopback_addresses() -> None:
    deployment = kai_module.KaiDeployment(RealCluster())
    deployment.bin = Path("/kai/bin")
    commands = {name: deployment._command(name) for name in kai_module.COMPONENTS}
    scheduler, health, env = commands["scheduler"]
    assert scheduler[0] == "/kai/bin/scheduler" and env == {"GOGC": "400"}
    assert f"--scheduler-conf={kai_module.CONFIG}" in scheduler and "--scheduler-name=kai-scheduler" in scheduler
    assert health.startswith("http://127.0.0.1:")
    binder = commands["binder"][0]
    assert binder[binder.index("--resource-reservation-namespace") + 1] == "kai-resource-reservation"
    assert binder[binder.index("--qps") + 1] == "20" and binder[binder.index("--burst") + 1] == "100"
    assert "--enable-webhook=false" in commands["queuecontroller"][0]
    assert "--enable-podgroup-webhook=false" in commands["podgroupcontroller"][0]
    for command, _, _ in commands.values():  # every address flag KAI has is given a loopback port
        for i, arg in enumerate(command):
            if arg.startswith("--") and "address" in arg:
                value = arg.split("=", 1)[1] if "=" in arg else command[i + 1]
                assert value.startswith("127.0.0.1:"), command


def test_kais_scheduler_config_is_the_operators_default() -> None:
    config = yaml.safe_load(kai_module.CONFIG.read_text())
    assert config["actions"] == "allocate, consolidation, reclaim, preempt, stalegangeviction"
    [tier] = config["tiers"]
    names = [p["name"] for p in tier["plugins"]]
    assert names[:3] == ["predicates", "proportion", "priority"] and names[-3:] == [
        "gpupack",
        "nodeplacement",
        "gpusharingorder",
    ]
    assert len(names) == len(set(names)) == 19
    assert tier["plugins"][-2]["arguments"] == {"cpu": "binpack", "gpu": "binpack"}


def test_the_charts_default_queues_have_no_quota_and_no_limit() -> None:
    parent, child = kai_module.default_queues()
    assert (parent["metadata"]["name"], child["spec"]["parentQueue"]) == (
        "default-parent-queue",
        "default-parent-queue",
    )
    assert child["metadata"]["name"] == "default-queue"
    assert all(r == {"quota": 0, "limit": -1, "overQuotaWeight": 1} for r in child["spec"]["resources"].values())


def test_the_workload_api_apiserver_is_a_set_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(build.GO_DIR, tmp_path / "go")
    monkeypatch.setattr(build, "GO_DIR", tmp_path / "go")
    version = "go1.26.8 linux amd64"
    control_plane, workload_api = build.cache_key(version), build.cache_key(version, build.WORKLOAD_API)
    assert workload_api != control_plane
    (tmp_path / "go" / "kube137" / "go.sum").write_text("changed\n")
    assert build.cache_key(version, build.WORKLOAD_API) != workload_api
    assert build.cache_key(version) == control_plane
    assert build.pinned_versions(build.WORKLOAD_API) == {"k8s.io/kubernetes": "v1.37.2"}
    assert [t.name for t in build.WORKLOAD_API.targets] == ["kube-apiserver"]


def test_a_workload_api_cluster_runs_that_apiserver_with_the_gate_and_the_version_on(tmp_path: Path) -> None:
    cluster = RealCluster(ClusterOptions(workload_api=True))
    cluster.bin, cluster.apiserver_bin = Path("/e2e/bin"), Path("/wl/bin")
    cluster.pki = make_pki(tmp_path)
    cluster.dir = tmp_path
    command = cluster._apiserver_command()
    assert command[0] == "/wl/bin/kube-apiserver"
    assert "--feature-gates=GenericWorkload=true" in command
    assert "--runtime-config=scheduling.k8s.io/v1beta1=true" in command
    plain = RealCluster(ClusterOptions())
    plain.bin = plain.apiserver_bin = Path("/e2e/bin")
    plain.pki, plain.dir = cluster.pki, tmp_path
    assert not [a for a in plain._apiserver_command() if "GenericWorkload" in a or "runtime-config" in a]
