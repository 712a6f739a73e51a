"""The scheduler config file (docs/architecture.md#scheduler-config): KAI's defaults, and one-line
errors for bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from kai_ray.config import DEFAULT_ACTIONS
from kai_ray.errors import ConfigError
from kai_ray.io.config import config_from_mapping, load_config


def test_no_config_file_means_kai_defaults() -> None:
    config = load_config(None)
    assert config.schedulerName == "kai-scheduler"
    assert config.actions == ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")
    assert (config.placementStrategy.gpu, config.placementStrategy.cpu) == ("binpack", "binpack")
    assert config.placementStrategy.gpu_device == "pack"
    assert config.kValue == 1.0 and config.defaultStalenessGracePeriod == 60.0 and config.shards == "auto"


def test_an_empty_config_file_is_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert load_config(path) == load_config(None)


def test_the_documented_example_loads(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "schedulerName: my-scheduler\n"
        "actions: [allocate, reclaim]\n"
        "placementStrategy: {gpu: spread, cpu: binpack}\n"
        "kValue: 0.5\n"
        "defaultStalenessGracePeriod: 1m30s\n"
        "shards: 3\n"
    )
    config = load_config(path)
    assert config.schedulerName == "my-scheduler" and config.actions == ("allocate", "reclaim")
    assert config.placementStrategy.gpu_device == "spread"  # follows gpu spread unless set
    assert config.kValue == 0.5 and config.defaultStalenessGracePeriod == 90 and config.shards == 3


def test_spread_placement_switches_consolidation_off_as_kai_does() -> None:
    assert "consolidation" in config_from_mapping({}).effective_actions
    spread = config_from_mapping({"placementStrategy": {"cpu": "spread"}})
    assert spread.effective_actions == tuple(a for a in DEFAULT_ACTIONS if a != "consolidation")


def test_an_explicit_gpu_device_strategy_wins() -> None:
    config = config_from_mapping({"placementStrategy": {"gpu": "binpack", "gpuDevice": "spread"}})
    assert config.placementStrategy.gpu_device == "spread"


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"placementStrategy": {"gpu": "tightly"}}, "placementStrategy.gpu"),
        ({"placementStrategy": {"gpuDevice": "binpack"}}, "placementStrategy.gpuDevice"),
        ({"placementStrategy": "spread"}, "placementStrategy"),
        ({"defaultStalenessGracePeriod": "forever"}, "defaultStalenessGracePeriod"),
        ({"defaultPreemptMinRuntime": "10 minutes"}, "defaultPreemptMinRuntime"),
        ({"actions": ["allocate", "dance"]}, "actions.1"),
        ({"actions": "allocate"}, "actions"),
        ({"kValue": -1}, "kValue"),
        ({"shards": 0}, "shards"),
        ({"reclaimerSaturationMultiplier": 0.5}, "reclaimerSaturationMultiplier"),
        ({"schedulerNmae": "typo"}, "schedulerNmae"),
    ],
)
def test_a_bad_setting_is_one_line_naming_the_file_and_the_field(settings: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_mapping(settings, "cfg.yaml")
    message = str(caught.value)
    assert message.startswith(f"cfg.yaml: {field}: ") and "\n" not in message


def test_a_bad_duration_says_what_was_written() -> None:
    with pytest.raises(ConfigError, match=r"defaultStalenessGracePeriod: bad duration 'forever'"):
        config_from_mapping({"defaultStalenessGracePeriod": "forever"}, "cfg.yaml")


def test_a_config_that_is_not_a_mapping_or_has_two_documents_is_refused(tmp_path: Path) -> None:
    listed = tmp_path / "listed.yaml"
    listed.write_text("- allocate\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(listed)
    twice = tmp_path / "twice.yaml"
    twice.write_text("kValue: 1\n---\nkValue: 2\n")
    with pytest.raises(ConfigError, match="expected one YAML document, found 2"):
        load_config(twice)


def test_an_unknown_choice_says_what_was_written() -> None:
    with pytest.raises(ConfigError, match=r"placementStrategy.gpu: Input should be 'binpack' or 'spread', got 'tight'"):
        config_from_mapping({"placementStrategy": {"gpu": "tight"}}, "cfg.yaml")


def test_the_mig_node_label_key_is_kais_default_unless_set_and_must_be_a_label_key() -> None:
    assert config_from_mapping({}).migWorkerNodeLabelKey == "node-role.kubernetes.io/mig-enabled"
    assert config_from_mapping({"migWorkerNodeLabelKey": "example.com/mig"}).migWorkerNodeLabelKey == "example.com/mig"
    with pytest.raises(ConfigError) as caught:
        config_from_mapping({"migWorkerNodeLabelKey": "not a label/"}, "c.yaml")
    assert str(caught.value) == "c.yaml: migWorkerNodeLabelKey: must be a node label key, got 'not a label/'"
