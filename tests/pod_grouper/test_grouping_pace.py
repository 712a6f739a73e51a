"""The pod grouper works through many new pods at once: each pod costs API round trips, and a
burst of thousands grouped one after another kept new pods waiting for minutes."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from k8s_adapter.api import Response
from pod_grouper.live import GROUPING_CONCURRENCY, PodGrouper

ROUND_TRIP = 0.05  # seconds the API takes to answer each request


class SlowApi:
    """Answers every request after ROUND_TRIP, and counts how many were open at once."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.open = self.most_open = 0

    async def request(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> Response:
        self.calls.append((method, path))
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        await asyncio.sleep(ROUND_TRIP)
        self.open -= 1
        return Response(200, {})


def _pod(i: int) -> dict[str, Any]:
    return {"metadata": {"name": f"p{i}", "namespace": "team", "uid": f"u{i}", "labels": {}}, "spec": {}}


async def test_a_burst_of_bare_pods_is_grouped_concurrently_and_each_once() -> None:
    api = SlowApi()
    grouper = PodGrouper(api)  # type: ignore[arg-type]
    pods = [_pod(i) for i in range(200)]
    assert await grouper.group(pods) == 200
    posts = [path for method, path in api.calls if method == "POST"]
    patches = [path for method, path in api.calls if method == "PATCH"]
    assert len(posts) == 200 and len(patches) == 200  # one PodGroup and one annotation per bare pod
    assert api.most_open == GROUPING_CONCURRENCY  # many at once, never more than the bound
    assert await grouper.group(pods) == 0  # done pods are not grouped again
