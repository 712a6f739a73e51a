"""An in-memory stand-in for KubeApi: scripted answers and recorded requests (unit tests only)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from k8s_adapter.api import JSON, KubeError, Response

Handler = Callable[[str, str, Mapping[str, Any] | None, Any], Response]


@dataclass
class FakeApi:
    handler: Handler
    calls: list[tuple[str, str, Any]] = field(default_factory=list)
    streams: list[list[JSON] | KubeError] = field(default_factory=list)

    async def request(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> Response:
        self.calls.append((method, path, body))
        return self.handler(method, path, query, body)

    async def stream(self, path: str, query: Mapping[str, Any], timeout: float) -> AsyncIterator[JSON]:
        self.calls.append(("WATCH", path, dict(query)))
        script = self.streams.pop(0) if self.streams else []
        if isinstance(script, KubeError):
            raise script
        for event in script:
            yield event


def ok(body: JSON | None = None) -> Response:
    return Response(200, body or {})


def fail(status: int, reason: str = "") -> Response:
    raise KubeError(status, reason or str(status), {"kind": "Status", "code": status, "reason": reason})
