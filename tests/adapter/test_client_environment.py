"""The API client reads the environment's proxy and .netrc once, and still honours them.

aiohttp, told to trust the environment, looks both up again in a worker thread for every
request; kai-ray decides at connect time whether either applies to the API server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp.client
import aiohttp.helpers
import pytest
from aiohttp import web

from k8s_adapter.api import connect

NAMESPACES = "/api/v1/namespaces"


@asynccontextmanager
async def recording_server() -> AsyncIterator[tuple[int, list[web.Request]]]:
    """An HTTP server answering every request with an empty list; yields its port and what it got."""
    seen: list[web.Request] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(request)
        return web.json_response({"kind": "List", "items": []})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield port, seen
    finally:
        await runner.cleanup()


def kubeconfig(tmp_path: Path, server: str, user: str = "{token: t0ken}") -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n"
        f"users: [{{name: u, user: {user}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    return str(path)


@pytest.fixture
def quiet_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))


@pytest.mark.usefixtures("quiet_environment")
async def test_with_nothing_in_the_environment_requests_do_not_look_it_up(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    lookups: list[str] = []
    looked_up = aiohttp.helpers.netrc_from_env

    def counted() -> Any:
        lookups.append("netrc")
        return looked_up()

    # aiohttp's per-request lookup calls it by the name its client module imported.
    monkeypatch.setattr(aiohttp.client, "netrc_from_env", counted)
    async with recording_server() as (port, seen):
        api = await connect(kubeconfig(tmp_path, f"http://127.0.0.1:{port}"))
        try:
            for _ in range(5):
                await api.request("GET", NAMESPACES)
        finally:
            await api.close()
    assert len(seen) == 5
    assert lookups == []


@pytest.mark.usefixtures("quiet_environment")
async def test_a_netrc_entry_for_the_api_server_is_sent_where_no_token_is(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login alice password secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    async with recording_server() as (port, seen):
        for user in ("{}", "{token: t0ken}"):
            api = await connect(kubeconfig(tmp_path, f"http://127.0.0.1:{port}", user))
            try:
                await api.request("GET", NAMESPACES)
            finally:
                await api.close()
    # With a token, the kubeconfig's credentials are the ones sent: aiohttp, left to add the
    # netrc's, refused every request.
    assert [request.headers.get("Authorization", "").split()[0] for request in seen] == ["Basic", "Bearer"]


@pytest.mark.usefixtures("quiet_environment")
async def test_a_proxy_from_the_environment_still_carries_the_requests(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async with recording_server() as (proxy_port, through_proxy):
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy_port}")
        api = await connect(kubeconfig(tmp_path, "http://apiserver.example:8080"))
        try:
            await api.request("GET", NAMESPACES)
        finally:
            await api.close()
    assert [str(request.url) for request in through_proxy] == [f"http://apiserver.example:8080{NAMESPACES}"]
