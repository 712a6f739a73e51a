"""The live grouper writes a workload's preemptibility label into the PodGroup it creates, as
KAI's grouper does: the top owner's label first, then the pod's; an invalid one is left out."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from pod_grouper.live import PodGrouper
from tests.adapter.fake_api import FakeApi, ok


async def group_bare_pod(label: str) -> dict[str, Any]:
    api = FakeApi(lambda method, path, query, body: ok({}))
    pod = {
        "metadata": {"name": "p", "namespace": "team", "uid": "u", "labels": {"kai.scheduler/preemptibility": label}},
        "spec": {},
    }
    assert await PodGrouper(api).group([pod]) == 1  # type: ignore[arg-type]
    [group] = [body for method, _, body in api.calls if method == "POST"]
    spec: dict[str, Any] = group["spec"]
    return spec


async def test_a_semi_preemptible_pod_gets_a_semi_preemptible_pod_group() -> None:
    assert (await group_bare_pod("semi-preemptible"))["preemptibility"] == "semi-preemptible"


async def test_an_invalid_label_is_left_out_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="pod_grouper.live"):
        spec = await group_bare_pod("sometimes")
    assert "preemptibility" not in spec  # the priority decides, as KAI's grouper does
    assert "ignored label kai.scheduler/preemptibility='sometimes'" in caplog.text
