"""The config keys of issue 15: KAI's usageDBConfig shape, and one-line errors for bad values."""

from __future__ import annotations

import pytest

from kai_ray.errors import ConfigError
from kai_ray.io.config import config_from_mapping


def test_kais_scheduling_shard_usage_section_loads_as_written() -> None:
    config = config_from_mapping(
        {
            "kValue": 0.5,
            "usageDBConfig": {
                "clientType": "prometheus",
                "connectionString": "http://prometheus-operated.kai-scheduler.svc.cluster.local:9090",
                "usageParams": {
                    "windowSize": "1w",
                    "windowType": "sliding",
                    "halfLifePeriod": "10m",
                    "extraParams": {"gpuAllocationMetric": "kai_queue_allocated_gpus", "queryResolution": "30s"},
                },
            },
        }
    )
    assert config.usageDBConfig is not None
    params = config.usageDBConfig.usageParams
    assert (params.windowSize, params.halfLifePeriod, params.fetchInterval, params.stalenessPeriod) == (
        7 * 86400,
        600,
        60,
        300,
    )


def test_defaults_change_nothing() -> None:
    config = config_from_mapping({})
    assert config.usageDBConfig is None and config.jobAging is None
    assert config.expectedRuntimeExceeded == "ignore" and config.reclaimResolveMethod == "lca"
    assert "runtimelimit" not in config.effective_actions
    assert config_from_mapping({"expectedRuntimeExceeded": "stop"}).effective_actions[-1] == "runtimelimit"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"usageDBConfig": {"clientType": "influx"}}, "usageDBConfig.clientType: Input should be"),
        ({"usageDBConfig": {"clientType": "prometheus"}}, "connectionString: the Prometheus URL is required"),
        ({"usageDBConfig": {"clientType": "accounting", "usageParams": {"windowSize": "1 week"}}}, "windowSize"),
        ({"usageDBConfig": {"clientType": "accounting", "usageParams": {"windowType": "cron"}}}, "cron windows"),
        (
            {"usageDBConfig": {"clientType": "accounting", "usageParams": {"windowType": "tumbling"}}},
            "tumblingWindowStartTime: required",
        ),
        (
            {"usageDBConfig": {"clientType": "accounting", "usageParams": {"extraParams": {"queryResolution": "1m"}}}},
            "extraParams.queryResolution: not a parameter of clientType accounting",
        ),
        ({"jobAging": {"interval": "soon"}}, "jobAging.interval: bad duration"),
        ({"jobAging": {"interval": "10m", "maxBoost": 0}}, "jobAging.maxBoost"),
        ({"expectedRuntimeExceeded": "kill"}, "expectedRuntimeExceeded"),
        ({"reclaimResolveMethod": "root"}, "reclaimResolveMethod"),
        ({"defaultReclaimMinRuntime": "-5s"}, "defaultReclaimMinRuntime: must not be negative"),
    ],
)
def test_a_bad_setting_is_one_line_naming_the_field(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_mapping(settings, "config.yaml")
    text = str(caught.value)
    assert text.startswith("config.yaml: ") and message in text and "\n" not in text
