"""The pieces of realcluster that need no Go: the PKI, kwok's stages, the build cache key."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from realcluster import build, kwok
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
