"""A pod's requests as the parser adds them up: remembered per distinct resources text, never at
the price of an error the long way would have raised."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kai_ray.errors import InputError
from kai_ray.io.fields import ObjectReader
from kai_ray.io.parse_core import parse_pod


def pod(name: str, resources: Any, init: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "kai-scheduler", "containers": [{"name": "main", "resources": resources}]}
    if init is not None:
        spec["initContainers"] = [{"name": "init", "resources": init}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"}, "spec": spec}


def requests_of(obj: dict[str, Any]) -> tuple[float, float, float]:
    parsed = parse_pod(ObjectReader(obj, 0))
    return parsed.requests.cpu, parsed.requests.memory, parsed.requests.gpu


def test_pods_of_one_template_and_their_variants_each_get_their_own_sum() -> None:
    base = {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "1"}}
    assert requests_of(pod("a", base)) == (2000, 2**30, 1)
    assert requests_of(pod("b", copy.deepcopy(base))) == (2000, 2**30, 1)
    assert requests_of(pod("c", {**base, "requests": {"cpu": "3", "memory": "1Gi"}})) == (3000, 2**30, 1)
    # A bigger init container sets the effective request, so it is part of what is remembered.
    assert requests_of(pod("d", base, init={"requests": {"cpu": "8"}})) == (8000, 2**30, 1)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "abc", [1]])
def test_a_bad_resources_section_is_refused_even_after_a_good_one_that_writes_the_same(bad: object) -> None:
    """orjson writes NaN and infinity as null: `requests: null` (empty, fine) must not vouch for them."""
    assert requests_of(pod("fine", {"requests": None})) == (0, 0, 0)
    with pytest.raises(InputError):
        requests_of(pod("bad", {"requests": bad}))
    with pytest.raises(InputError):
        requests_of(pod("bad-section", bad))
    with pytest.raises(InputError):
        requests_of(pod("bad-cpu", {"requests": {"cpu": bad}}))
