"""One thin seam over kubernetes-asyncio for raw JSON requests and watch streams.

The adapter reads and writes plain dicts (decoded once with orjson) instead of the
generated models, which are the CPU and memory hot spot on large clusters. Every request
goes through ``KubeApi.request`` or ``KubeApi.stream``: authentication, TLS and the
kubeconfig handling stay kubernetes-asyncio's.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

JSON = dict[str, Any]
CONNECTIONS = 128  # the client's connection pool: watches hold one each, requests share the rest
OPEN_REQUESTS = 112  # requests open at once (the pool less room for the watches and the lease)
OTHER_REQUESTS = 24  # of which not urgent: status, events, PodGroups, clocks
# A watch event carries a whole object, up to etcd's 1.5 MiB request limit: past aiohttp's
# default read buffer (kubernetes-asyncio sizes its own session the same way).
READ_BUFFER = 2**21
_URGENT: contextvars.ContextVar[bool] = contextvars.ContextVar("kai_ray_urgent_request", default=False)


@contextlib.contextmanager
def urgent() -> Iterator[None]:
    """Requests sent inside (by this task and the tasks it starts) go ahead of the others
    waiting for a slot: binds, which pods wait on, before status, events and PodGroups."""
    token = _URGENT.set(True)
    try:
        yield
    finally:
        _URGENT.reset(token)


class RequestGate:
    """At most ``limit`` requests open at once, of which at most ``others`` not urgent; a freed slot
    goes to the oldest urgent request waiting, else to the oldest other one (within its cap).

    Without it every writer (binder, pod grouper, status, events, job clocks) queued for the
    client's connections in one line, so on a loaded apiserver a bind waited behind a pass of
    PodGroup creates and status patches that no pod waits on; and those, sent as fast as slots
    came free, took the apiserver's time from the binds and from the pods being created.
    """

    def __init__(self, limit: int = OPEN_REQUESTS, others: int = OTHER_REQUESTS) -> None:
        self.limit = limit
        self.others = min(others, limit)
        self.open = 0
        self.others_open = 0
        self.urgent_waiting: deque[asyncio.Future[None]] = deque()
        self.other_waiting: deque[asyncio.Future[None]] = deque()

    def waiting(self) -> int:
        return len(self.urgent_waiting) + len(self.other_waiting)

    def _may_enter(self, is_urgent: bool) -> bool:
        if self.open >= self.limit:
            return False
        return is_urgent or self.others_open < self.others

    def _enter(self, is_urgent: bool) -> None:
        self.open += 1
        if not is_urgent:
            self.others_open += 1

    async def acquire(self, is_urgent: bool) -> None:
        line = self.urgent_waiting if is_urgent else self.other_waiting
        if self._may_enter(is_urgent) and not line and (is_urgent or not self.urgent_waiting):
            self._enter(is_urgent)
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        line.append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.release(is_urgent)  # let in as the wait was cancelled: pass the slot on
            else:
                with contextlib.suppress(ValueError):
                    line.remove(turn)
            raise

    def release(self, is_urgent: bool) -> None:
        self.open -= 1
        if not is_urgent:
            self.others_open -= 1
        self._wake()

    def _wake(self) -> None:
        for is_urgent, line in ((True, self.urgent_waiting), (False, self.other_waiting)):
            while line and self._may_enter(is_urgent):
                turn = line.popleft()
                if not turn.done():
                    self._enter(is_urgent)
                    turn.set_result(None)


class KubeError(Exception):
    """A request that did not succeed: ``status`` is the HTTP code (0 when none came back)."""

    def __init__(self, status: int, reason: str, body: JSON | None = None) -> None:
        super().__init__(f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.body = body or {}

    @property
    def transient(self) -> bool:
        return self.status in (0, 429, 500, 502, 503, 504)


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: JSON


class KubeApi:
    def __init__(self, client: Any, open_requests: int = OPEN_REQUESTS) -> None:
        self.client = client  # kubernetes_asyncio.client.ApiClient
        self.gate = RequestGate(open_requests)  # watches (``stream``) hold their connection outside it

    async def request(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> Response:
        """Send one request; non-2xx answers raise KubeError with the server's Status body.
        Inside ``urgent()`` it goes ahead of other requests waiting for a slot."""
        is_urgent = _URGENT.get()
        await self.gate.acquire(is_urgent)
        try:
            raw = await self._call(method, path, query, body, content_type, timeout)
            try:
                data = await raw.read()
            except (TimeoutError, aiohttp.ClientError) as exc:
                raise KubeError(0, f"reading the answer failed: {exc}") from exc
            finally:
                raw.release()
        finally:
            self.gate.release(is_urgent)
        parsed: JSON = {}
        if data:
            try:
                loaded = orjson.loads(data)
                parsed = loaded if isinstance(loaded, dict) else {"items": loaded}
            except orjson.JSONDecodeError:
                parsed = {"message": data[:200].decode(errors="replace")}
        if not 200 <= raw.status < 300:
            raise KubeError(raw.status, str(parsed.get("reason") or parsed.get("message") or raw.reason), parsed)
        return Response(raw.status, parsed)

    async def stream(self, path: str, query: Mapping[str, Any], timeout: float) -> AsyncIterator[JSON]:
        """Watch events, one JSON object per line, until the server ends the stream."""
        raw = await self._call("GET", path, query, None, "application/json", timeout)
        try:
            if not 200 <= raw.status < 300:
                data = await raw.read()
                body = orjson.loads(data) if data.startswith(b"{") else {}
                raise KubeError(raw.status, str(body.get("reason") or raw.reason), body)
            async for line in raw.content:
                line = line.strip()
                if line:
                    yield orjson.loads(line)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise KubeError(0, f"watch stream broke: {exc}") from exc
        finally:
            raw.release()

    async def _call(
        self, method: str, path: str, query: Mapping[str, Any] | None, body: Any, content_type: str, timeout: float
    ) -> Any:
        params = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        headers = {"Accept": "application/json", "Content-Type": content_type}
        try:
            return await self.client.call_api(
                path,
                method,
                query_params=params,
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=timeout),
            )
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise KubeError(0, f"{method} {path}: {exc}") from exc

    async def close(self) -> None:
        await self.client.close()


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


async def connect(kubeconfig: str | None = None, context: str | None = None) -> KubeApi:
    """A client from a kubeconfig file, or the in-cluster service account when none is given.

    A configuration that cannot be used (no kubeconfig outside a cluster, a kubeconfig that is
    missing or not one) is the user's to fix: it raises ``InputError`` with one line.
    """
    import yaml

    from k8s_adapter import lazy_client

    lazy_client.install()  # the client's names load as used: its models are most of a second
    from kubernetes_asyncio import client, config
    from kubernetes_asyncio.config.config_exception import ConfigException

    from kai_ray.errors import InputError

    if kubeconfig and not os.path.isfile(kubeconfig):
        raise InputError(f"{kubeconfig}: no such kubeconfig file")
    configuration = client.Configuration()
    try:
        if kubeconfig:
            await config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration)
        else:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except ConfigException as exc:
        if not kubeconfig:
            raise InputError(
                "no kubeconfig given (--kubeconfig or $KUBECONFIG) and not running in a cluster "
                f"({str(exc).rstrip('.')})"
            ) from None
        raise InputError(f"{kubeconfig}: not a usable kubeconfig: {str(exc).splitlines()[0]}") from None
    except (OSError, ValueError, TypeError, AttributeError, KeyError, yaml.YAMLError) as exc:  # unreadable, not YAML
        raise InputError(f"{kubeconfig}: not a usable kubeconfig: {exc}") from None
    configuration.connection_pool_maxsize = CONNECTIONS
    api_client = client.ApiClient(configuration)
    token = "BearerToken" in configuration.api_key
    if not _environment_applies(configuration.host, token, proxy_configured=bool(configuration.proxy)):
        _skip_environment_lookups(api_client.rest_client)
    return KubeApi(api_client)


def _environment_applies(server: str | None, token: bool, proxy_configured: bool) -> bool:
    """Whether a ``.netrc`` entry or a proxy from the environment applies to the API server.

    kubernetes-asyncio's session trusts the environment, so aiohttp looks both up again for every
    request, each in a worker thread: about 1.3 ms of CPU a request, five times the rest of it.
    The environment does not change under a running scheduler, so one look at connect time
    decides as every later one would (the same lookups, in aiohttp's order).

    A ``.netrc`` entry counts only without a bearer token: aiohttp refuses a request carrying both
    (every request failed so), and the kubeconfig's credentials are the ones meant.
    """
    from urllib.parse import urlsplit
    from urllib.request import proxy_bypass

    from aiohttp.helpers import basicauth_from_netrc, netrc_from_env, proxies_from_env

    parts = urlsplit(server or "")
    if not parts.hostname:
        return True  # nothing to decide on: leave aiohttp its own lookups
    if not token:
        try:
            basicauth_from_netrc(netrc_from_env(), parts.hostname)
            return True
        except LookupError:
            pass
    if proxy_configured or proxy_bypass(parts.hostname):
        return False  # a configured proxy goes with every request; a bypassed host takes none from the environment
    return parts.scheme in proxies_from_env()


def _skip_environment_lookups(rest_client: Any) -> None:
    """Swap the client's session for one on the same connections that does not consult the
    environment per request."""
    trusting = rest_client.pool_manager
    connector = trusting.connector
    trusting.detach()  # the new session owns the connections now; the old one is closed, not them
    rest_client.pool_manager = aiohttp.ClientSession(connector=connector, trust_env=False, read_bufsize=READ_BUFFER)


def describe(exc: KubeError) -> str:
    """One line for a failed request: the server's own message when it sent one."""
    message = exc.body.get("message") if isinstance(exc.body, dict) else None
    return f"{exc.status} {message}" if message else str(exc)
