"""Malformed input ends in exactly one line on stderr naming the object and the field, exit 2.

Each case is a file a user might really hand to ``kai-ray schedule``; the test checks only what
the user sees: the exit code, that stdout is empty, and the one line of stderr.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import manifests as m
from tests.cli.conftest import CliResult, RunCli
from tests.conftest import REPO

NODE = m.node("n1")
QUEUE = m.queue("q")


def with_pod_field(path: list[str], value: object, base: m.Manifest | None = None) -> list[m.Manifest]:
    manifest = base or m.pod("p", "q")
    target = manifest
    for key in path[:-1]:
        target = target[key] if isinstance(target, dict) else target[int(key)]
    target[path[-1]] = value
    return [NODE, QUEUE, manifest]


def pod_requesting(**requests: object) -> list[m.Manifest]:
    return with_pod_field(["spec", "containers", "0", "resources", "requests"], requests)


def with_annotations(**annotations: str) -> list[m.Manifest]:
    return [NODE, QUEUE, m.pod("p", "q", annotations=annotations)]


def without(manifest: m.Manifest, *path: str) -> m.Manifest:
    target = manifest
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return manifest


def assert_one_line_error(result: CliResult, *expected: str) -> None:
    assert result.code == 2, result.err
    assert result.out == ""
    assert len(result.error_lines) == 1, result.err
    line = result.error_lines[0]
    assert line.startswith("kai-ray: error: ") and "Traceback" not in result.err
    for text in expected:
        assert text in line, f"{text!r} not in {line!r}"


MALFORMED_OBJECTS: list[tuple[str, list[m.Manifest], tuple[str, ...]]] = [
    (
        "bad cpu quantity",
        pod_requesting(cpu="1x"),
        ("Pod team/p", "spec.containers[0].resources.requests.cpu", "bad quantity '1x'"),
    ),
    (
        "bad memory quantity",
        pod_requesting(memory="16GB"),
        ("Pod team/p", "spec.containers[0].resources.requests.memory", "'16GB'"),
    ),
    (
        "negative request",
        pod_requesting(cpu="-500m"),
        ("Pod team/p", "spec.containers[0].resources.requests.cpu", "negative"),
    ),
    (
        "requests not a mapping",
        with_pod_field(["spec", "containers", "0", "resources", "requests"], ["cpu", 1]),
        ("Pod team/p", "spec.containers[0].resources.requests", "must be a mapping"),
    ),
    (
        "resources not a mapping",
        with_pod_field(["spec", "containers", "0", "resources"], "big"),
        ("Pod team/p", "spec.containers[0].resources", "must be a mapping"),
    ),
    (
        "fractional whole gpus",
        pod_requesting(**{"nvidia.com/gpu": "0.5"}),
        ("Pod team/p", "nvidia.com/gpu", "whole number"),
    ),
    (
        "gpu fraction above one",
        with_annotations(**{"gpu-fraction": "1.5"}),
        ("Pod team/p", "metadata.annotations.gpu-fraction", "(0, 1]"),
    ),
    (
        "gpu fraction zero",
        with_annotations(**{"gpu-fraction": "0"}),
        ("Pod team/p", "metadata.annotations.gpu-fraction", "(0, 1]"),
    ),
    (
        "gpu fraction negative",
        with_annotations(**{"gpu-fraction": "-0.5"}),
        ("Pod team/p", "metadata.annotations.gpu-fraction", "(0, 1]"),
    ),
    (
        "gpu fraction not a number",
        with_annotations(**{"gpu-fraction": "half"}),
        ("Pod team/p", "metadata.annotations.gpu-fraction", "'half'"),
    ),
    (
        "gpu memory not a number",
        with_annotations(**{"gpu-memory": "lots"}),
        ("Pod team/p", "metadata.annotations.gpu-memory", "'lots'"),
    ),
    ("pod without containers", with_pod_field(["spec", "containers"], []), ("Pod team/p", "spec.containers")),
    (
        "bad creation timestamp",
        with_pod_field(["metadata", "creationTimestamp"], "yesterday"),
        ("Pod team/p", "metadata.creationTimestamp", "'yesterday'"),
    ),
    (
        "bad node quantity",
        [m.node("n1", gpu=0) | {"status": {"allocatable": {"nvidia.com/gpu": "two"}}}],
        ("Node n1", "status.allocatable.nvidia.com/gpu", "'two'"),
    ),
    (
        "node without allocatable",
        [without(m.node("n1"), "status", "allocatable")],
        ("Node n1", "status.allocatable", "missing"),
    ),
    ("object without a name", [without(m.node("n1"), "metadata", "name")], ("Node", "metadata.name", "missing")),
    ("queue without resources", [without(m.queue("q"), "spec", "resources")], ("Queue q", "spec.resources", "missing")),
    (
        "queue quota below minus one",
        [m.queue("q", resources={"gpu": {"quota": -2, "limit": -1}})],
        ("Queue q", "spec.resources.gpu.quota", "-2"),
    ),
    (
        "queue quota as a quantity",
        [m.queue("q", resources={"memory": {"quota": "10Gi", "limit": -1}})],
        ("Queue q", "spec.resources.memory.quota", "'10Gi'"),
    ),
    (
        "queue priority not a number",
        [m.queue("q", priority="high")],  # type: ignore[arg-type]
        ("Queue q", "spec.priority", "'high'"),
    ),
    ("queue cycle", [m.queue("a", parent="b"), m.queue("b", parent="a")], ("Queue ", "spec.parentQueue", "cycle")),
    ("queue parent of itself", [m.queue("self", parent="self")], ("Queue self", "spec.parentQueue", "cycle")),
    (
        "priority class without value",
        [without(m.priority_class("pc", 1), "value")],
        ("PriorityClass pc", "value", "missing"),
    ),
    (
        "pod group min member not a number",
        [m.pod_group("g", "q") | {"spec": {"minMember": "x"}}],
        ("PodGroup team/g", "spec.minMember", "'x'"),
    ),
    (
        "pod group min member too large for a number",
        [m.pod_group("g", "q") | {"spec": {"minMember": 10**400}}],
        ("PodGroup team/g", "spec.minMember", "not a finite number"),
    ),
    (
        "pod group bad preemptibility",
        [m.pod_group("g", "q", preemptibility="sometimes")],
        ("PodGroup team/g", "spec.preemptibility", "'sometimes'"),
    ),
    ("duplicate pod", [m.pod("p", "q"), m.pod("p", "q")], ("Pod team/p", "metadata.name", "twice")),
]


@pytest.mark.parametrize(
    ("objects", "expected"), [(o, e) for _, o, e in MALFORMED_OBJECTS], ids=[name for name, _, _ in MALFORMED_OBJECTS]
)
def test_a_malformed_object_is_one_line_naming_it_and_the_field(
    kai_ray: RunCli,
    tmp_path: Path,
    objects: list[m.Manifest],
    expected: tuple[str, ...],
) -> None:
    path = m.write(tmp_path / "snapshot.yaml", objects)
    assert_one_line_error(kai_ray("schedule", "--snapshot", path, "--actions", "none"), *expected)


MALFORMED_FILES: list[tuple[str, str, tuple[str, ...]]] = [
    ("unclosed YAML flow", "apiVersion: v1\nkind: Node\nmetadata: {name: [n1\n", ("invalid YAML/JSON", "line 4")),
    ("bad YAML indentation", "kind: Node\n  metadata: x\n bad: y\n", ("invalid YAML/JSON",)),
    ("truncated JSON", '{"apiVersion": "v1", "kind": "List", "items": [{"kind": "Node"', ("invalid YAML/JSON",)),
    ("empty file", "", ("no Kubernetes objects",)),
    ("only comments", "# kubectl get all -o yaml\n", ("no Kubernetes objects",)),
    ("a YAML list of garbage", "- 1\n- foo\n- [a, b]\n", ("document 0", "expected a Kubernetes object")),
    ("a plain string", "just some text\n", ("expected a Kubernetes object",)),
    ("an object without kind", "apiVersion: v1\nmetadata: {name: x}\n", ("document 0", "kind: missing")),
    ("a List whose items are not a list", "kind: List\nitems: {a: 1}\n", ("List", "items", "must be a list")),
]


@pytest.mark.parametrize(
    ("text", "expected"), [(t, e) for _, t, e in MALFORMED_FILES], ids=[name for name, _, _ in MALFORMED_FILES]
)
def test_a_file_that_is_not_a_snapshot_is_one_line_naming_the_file(
    kai_ray: RunCli,
    tmp_path: Path,
    text: str,
    expected: tuple[str, ...],
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    assert_one_line_error(kai_ray("schedule", "--snapshot", path), "broken.yaml", *expected)


def test_a_missing_snapshot_file_is_one_line(kai_ray: RunCli, tmp_path: Path) -> None:
    result = kai_ray("schedule", "--snapshot", tmp_path / "nope.yaml")
    assert_one_line_error(result, "nope.yaml", "cannot read", "No such file")


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("placementStrategy: {gpu: tightly}\n", ("placementStrategy.gpu", "'tightly'")),
        ("defaultStalenessGracePeriod: forever\n", ("defaultStalenessGracePeriod", "bad duration 'forever'")),
        ("actions: [allocate, dance]\n", ("actions.1", "'dance'")),
        ("kValue: -1\n", ("kValue",)),
        ("- allocate\n", ("expected a mapping",)),
    ],
    ids=["placement strategy", "duration", "action", "negative k", "not a mapping"],
)
def test_a_bad_config_value_is_one_line_naming_the_setting(
    kai_ray: RunCli,
    tmp_path: Path,
    config: str,
    expected: tuple[str, ...],
) -> None:
    snapshot = m.write(tmp_path / "snapshot.yaml", [NODE])
    path = tmp_path / "config.yaml"
    path.write_text(config)
    assert_one_line_error(kai_ray("schedule", "--snapshot", snapshot, "--config", path), "config.yaml", *expected)


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--actions", "allocate,dance", ("--actions", "unknown action 'dance'", "known: allocate")),
        ("--now", "yesterday", ("--now", "bad timestamp 'yesterday'")),
        ("--config", "missing-config.yaml", ("missing-config.yaml", "cannot read")),
    ],
)
def test_a_bad_option_value_is_one_line(
    kai_ray: RunCli,
    tmp_path: Path,
    option: str,
    value: str,
    expected: tuple[str, ...],
) -> None:
    snapshot = m.write(tmp_path / "snapshot.yaml", [NODE])
    assert_one_line_error(kai_ray("schedule", "--snapshot", snapshot, option, value), *expected)


def test_bad_fair_share_input_is_one_line_too(kai_ray: RunCli, tmp_path: Path) -> None:
    path = tmp_path / "fs.yaml"
    path.write_text("total: {gpu: 4}\nqueues:\n  - {name: a, parent: b}\n  - {name: b, parent: a}\n")
    assert_one_line_error(kai_ray("fairshare", path), "fs.yaml", "queue a", "parent", "cycle")
    path.write_text("total: {gpu: 4}\nqueues:\n  - {name: a, resources: {gpu: {request: -3}}}\n")
    assert_one_line_error(kai_ray("fairshare", path), "queue a", "resources.gpu.request", "negative")


def test_the_installed_command_prints_no_traceback(tmp_path: Path) -> None:
    # Through ``python -m kai_ray`` end to end: the exit code and stderr a shell would see.
    path = m.write(tmp_path / "snapshot.yaml", pod_requesting(cpu="lots"))
    result = subprocess.run(
        [sys.executable, "-m", "kai_ray", "schedule", "--snapshot", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "kai-ray: error: Pod team/p: spec.containers[0].resources.requests.cpu: bad quantity 'lots'"
    ]
