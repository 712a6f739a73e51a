"""Input no Kubernetes object looks like: absurdly deep nesting, NaN and infinity, numbers too big
for a float, negative durations, unknown apiVersions, unusable kubeconfigs. Each ends in one
line on stderr and exit 2, whichever reader meets it (snapshot, config, fair-share input, run)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from kai_ray.errors import InputError
from kai_ray.io.documents import MAX_DEPTH, parse_documents, read_documents
from tests import manifests as m
from tests.cli.conftest import RunCli
from tests.cli.test_bad_input import assert_one_line_error

DEPTH = 2000


def deep_yaml(depth: int = DEPTH) -> str:
    return "a: " + "[" * depth + "]" * depth + "\n"


def deep_block_yaml(depth: int = DEPTH) -> str:
    return "".join("  " * i + "k:\n" for i in range(depth)) + "  " * depth + "v\n"


def deep_json(depth: int = DEPTH) -> str:
    return '{"kind": "List", "items": ' + "[" * depth + "]" * depth + "}"


@pytest.mark.parametrize("text", [deep_yaml(), deep_block_yaml(), deep_json(), deep_yaml(100_000)])
def test_deep_nesting_is_one_line_for_every_reader(kai_ray: RunCli, tmp_path: Path, text: str) -> None:
    deep = tmp_path / "deep.yaml"
    deep.write_text(text)
    snapshot = m.write(tmp_path / "ok.yaml", [m.node("n1")])
    # kai-ray's own limit, whatever nesting limit the installed YAML or JSON parser has of its own
    limit = f"{deep}: nested deeper than {MAX_DEPTH} levels"
    assert_one_line_error(kai_ray("schedule", "--snapshot", deep), limit)
    assert_one_line_error(kai_ray("schedule", "--snapshot", snapshot, "--config", deep), limit)
    assert_one_line_error(kai_ray("fairshare", deep), limit)


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 999, 1001, 5000])
@pytest.mark.parametrize("make", [deep_yaml, deep_block_yaml, deep_json])
def test_the_depth_limit_is_kai_rays_on_both_sides_of_the_parsers_own(make: Callable[[int], str], depth: int) -> None:
    """libyaml refuses input nested past 1,000 levels in some builds, before producing a single
    event; kai-ray measures again without it, so the same input gets the same message."""
    with pytest.raises(InputError) as refused:
        parse_documents(make(depth), "deep.yaml")
    assert str(refused.value) == f"deep.yaml: nested deeper than {MAX_DEPTH} levels"
    assert parse_documents(make(MAX_DEPTH - 2), "ok.yaml")  # just within the limit: read


@pytest.mark.parametrize(
    "content",
    [
        deep_json(MAX_DEPTH - 2).encode(),  # past the bound under which a file's JSON is read directly
        deep_json(MAX_DEPTH + 1).encode(),
        deep_json(40).encode(),
        b' \n\t{"kind": "List", "items": [{"a": NaN}]}',  # orjson refuses NaN; the standard library reads it
        b'{"kind": "List", "items": [{"a": "\xff"}]}',  # not UTF-8
        '\ufeff{"kind": "List", "items": []}'.encode(),  # a byte-order mark
        b"[1, 2,]",  # not JSON: YAML reads it
        b"{a: [}",
    ],
)
def test_a_file_is_read_as_its_text_would_be(tmp_path: Path, content: bytes) -> None:
    """Files are read from their bytes (plain JSON straight through the JSON parser): whatever
    the file holds, the documents or the one-line refusal are those of its text."""
    path = tmp_path / "input"
    path.write_bytes(content)
    try:
        expected: object = parse_documents(content.decode("utf-8"), str(path))
    except UnicodeDecodeError:
        expected = InputError(f"{path}: not UTF-8 text")
    except InputError as refused:
        expected = refused
    try:
        got: object = read_documents(path)
    except InputError as refused:
        got = refused
    if isinstance(expected, InputError):
        assert isinstance(got, InputError) and str(got) == str(expected)
    else:
        assert repr(got) == repr(expected)  # NaN is not equal to itself


def test_ordinary_nesting_is_not_refused(kai_ray: RunCli, tmp_path: Path) -> None:
    pod = m.pod("p", "q")
    pod["metadata"]["annotations"]["deep"] = "[" * 500  # brackets inside a string are not nesting
    nested: dict[str, object] = {}
    inner = nested
    for _ in range(60):  # unknown fields nested 60 deep: odd, but well within the limit
        inner["x"] = {}
        inner = inner["x"]  # type: ignore[assignment]
    pod["spec"]["extra"] = nested
    path = m.write(tmp_path / "s.yaml", [m.node("n1"), m.queue("q"), pod])
    assert kai_ray("schedule", "--snapshot", path).code == 0


@pytest.mark.parametrize(
    "node_gpus, expected",
    [(float("nan"), "not a finite quantity"), (float("inf"), "not a finite quantity"), ("1e400", "too large")],
)
def test_nan_infinity_and_overflowing_quantities_are_refused(
    kai_ray: RunCli, tmp_path: Path, node_gpus: object, expected: str
) -> None:
    node = m.node("n1")
    node["status"]["allocatable"]["nvidia.com/gpu"] = node_gpus
    path = m.write(tmp_path / "s.yaml", [node])
    assert_one_line_error(
        kai_ray("schedule", "--snapshot", path), "Node n1", "status.allocatable.nvidia.com/gpu", expected
    )


def test_a_nan_queue_quota_is_refused_not_printed(kai_ray: RunCli, tmp_path: Path) -> None:
    queue = m.queue("q", resources={"gpu": {"quota": float("nan"), "limit": -1}})
    path = m.write(tmp_path / "s.yaml", [m.node("n1"), queue])
    assert_one_line_error(kai_ray("schedule", "--snapshot", path), "Queue q", "spec.resources.gpu.quota", "finite")


@pytest.mark.parametrize(
    "settings, expected",
    [
        ({"kValue": float("inf")}, "kValue"),
        ({"kValue": float("nan")}, "kValue"),
        ({"victimSearchBackoff": "-10s"}, "victimSearchBackoff: must not be negative"),
        ({"defaultReclaimMinRuntime": -5}, "defaultReclaimMinRuntime: must not be negative"),
        ({"defaultStalenessGracePeriod": "9" * 400 + "s"}, "defaultStalenessGracePeriod: bad duration"),
    ],
)
def test_config_numbers_must_be_finite_and_durations_not_negative(
    kai_ray: RunCli, tmp_path: Path, settings: dict[str, object], expected: str
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(settings))
    snapshot = m.write(tmp_path / "s.yaml", [m.node("n1")])
    assert_one_line_error(kai_ray("schedule", "--snapshot", snapshot, "--config", config), expected)


def test_a_negative_staleness_grace_period_keeps_kais_meaning(kai_ray: RunCli, tmp_path: Path) -> None:
    """KAI's --default-staleness-grace-period: 'Negative values means infinite'; widely set to -1s."""
    config = tmp_path / "config.yaml"
    config.write_text("defaultStalenessGracePeriod: -1s\n")
    snapshot = m.write(tmp_path / "s.yaml", [m.node("n1")])
    assert kai_ray("schedule", "--snapshot", snapshot, "--config", config).code == 0


@pytest.mark.parametrize("total", [".inf", ".nan", "1e400"])
def test_fairshare_totals_must_be_finite(kai_ray: RunCli, tmp_path: Path, total: str) -> None:
    path = tmp_path / "fs.yaml"
    path.write_text(f"total: {{gpu: {total}}}\nqueues: [{{name: q}}]\n")
    assert_one_line_error(kai_ray("fairshare", path), "total.gpu")


def test_a_negative_queue_min_runtime_is_refused(kai_ray: RunCli, tmp_path: Path) -> None:
    queue = m.queue("q")
    queue["spec"]["reclaimMinRuntime"] = "-1s"
    path = m.write(tmp_path / "s.yaml", [m.node("n1"), queue])
    assert_one_line_error(kai_ray("schedule", "--snapshot", path), "Queue q", "spec.reclaimMinRuntime", "negative")


@pytest.mark.parametrize(
    "manifest, version, expected",
    [
        (m.queue("q"), "scheduling.run.ai/v9", "kai-ray reads Queue as scheduling.run.ai/v2"),
        (m.pod("p", "q"), "v2", "kai-ray reads Pod as v1"),
        (m.node("n1"), None, "'(missing)' is not read"),
    ],
)
def test_unknown_api_versions_of_known_kinds_are_refused(
    kai_ray: RunCli, tmp_path: Path, manifest: m.Manifest, version: str | None, expected: str
) -> None:
    if version is None:
        del manifest["apiVersion"]
    else:
        manifest["apiVersion"] = version
    path = m.write(tmp_path / "s.yaml", [manifest])
    assert_one_line_error(kai_ray("schedule", "--snapshot", path), "apiVersion", expected)


def test_a_kind_of_another_group_is_skipped_not_refused(kai_ray: RunCli, tmp_path: Path) -> None:
    other = {"apiVersion": "example.com/v1", "kind": "Queue", "metadata": {"name": "x"}}
    path = m.write(tmp_path / "s.yaml", [m.node("n1"), other])
    assert kai_ray("schedule", "--snapshot", path).code == 0


@pytest.mark.parametrize(
    "content, expected",
    [
        (None, "no such kubeconfig file"),
        (bytes(range(256)) * 4, "not UTF-8"),
        (deep_yaml().encode(), f"nested deeper than {MAX_DEPTH} levels"),
        (b"clusters: []\n", "clusters: missing or empty"),
        (b"[1, 2]\n", "not a kubeconfig"),
    ],
)
def test_an_unusable_kubeconfig_is_one_line(
    kai_ray: RunCli, tmp_path: Path, content: bytes | None, expected: str
) -> None:
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_bytes(content)
    assert_one_line_error(kai_ray("run", "--kubeconfig", path, "--metrics-port", "0"), str(path), expected)
