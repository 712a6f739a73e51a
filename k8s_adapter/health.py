"""/metrics, /healthz and /readyz on one small aiohttp server."""

from __future__ import annotations

import time
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry

from k8s_adapter.metrics import exposition


async def serve(
    registry: CollectorRegistry,
    port: int,
    healthy: Callable[[], bool],
    ready: Callable[[], bool],
    host: str = "0.0.0.0",
) -> web.AppRunner:  # noqa: S104 - a pod serves all
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=exposition(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok" if healthy() else "stalled", status=200 if healthy() else 503)

    async def readyz(_: web.Request) -> web.Response:
        return web.Response(text="ready" if ready() else "syncing", status=200 if ready() else 503)

    app = web.Application()
    app.add_routes([web.get("/metrics", metrics), web.get("/healthz", healthz), web.get("/readyz", readyz)])
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


def stalled_after(seconds: float, last: Callable[[], float]) -> Callable[[], bool]:
    """A liveness check: healthy while the loop finished an iteration within ``seconds``."""
    return lambda: time.monotonic() - last() < seconds
