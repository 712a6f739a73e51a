"""Kubernetes quantities, durations and timestamps as the loader reads them."""

from __future__ import annotations

from decimal import Decimal

import pytest

from kai_ray.io.fields import parse_time
from kai_ray.quantity import QuantityError, cpu_millis, parse_duration, parse_quantity, plain


@pytest.mark.parametrize(
    ("text", "millicores"),
    [
        ("2", 2000),
        ("250m", 250),
        ("0.5", 500),
        ("1.5", 1500),
        (4, 4000),
        ("100u", 0.1),
        ("1e1", 10_000),
    ],
)
def test_cpu_is_read_in_millicores(text: object, millicores: float) -> None:
    assert cpu_millis(text) == pytest.approx(millicores)


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        ("1Ki", 1024),
        ("16Gi", 16 * 2**30),
        ("1G", 10**9),
        ("500M", 5 * 10**8),
        ("1.5Gi", 1.5 * 2**30),
        ("1e3", 1000),
        ("2E3", 2000),
        ("110", 110),
        ("+5", 5),
        (".5", 0.5),
        ("0", 0),
        (8, 8),
        (2.5, 2.5),
    ],
)
def test_memory_and_counts_are_read_in_base_units(text: object, amount: float) -> None:
    assert plain(text) == amount


def test_binary_and_decimal_suffixes_are_exact() -> None:
    assert parse_quantity("1Ei") == Decimal(2**60)
    assert parse_quantity("3n") == Decimal("3e-9")


@pytest.mark.parametrize("text", ["", "1x", "Gi", "1 Gi", "1GiB", "ten", "1.2.3", "0x10", True, None, [1], {"a": 1}])
def test_text_that_is_not_a_quantity_is_refused(text: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("60s", 60),
        ("1h30m", 5400),
        ("500ms", 0.5),
        ("2m3s", 123),
        ("1.5h", 5400),
        ("0", 0),
        ("-5s", -5),
        (90, 90),
        ("10us", 1e-5),
    ],
)
def test_go_durations_are_read_in_seconds(text: object, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["soon", "", "5", "5d", "m5", "1h 2m", None, True])
def test_text_that_is_not_a_duration_is_refused(text: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_rfc3339_timestamps_with_or_without_zone_are_utc_epoch_seconds() -> None:
    assert parse_time("1970-01-01T00:01:00Z") == 60
    assert parse_time("1970-01-01T01:00:00+01:00") == 0
    assert parse_time("1970-01-01T00:00:10") == 10  # no zone: UTC, as Kubernetes writes it


def test_a_timestamp_that_is_not_rfc3339_is_refused() -> None:
    with pytest.raises(ValueError):
        parse_time("yesterday")
