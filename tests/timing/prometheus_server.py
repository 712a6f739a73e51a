"""A real Prometheus for the usage tests (Debian's ``prometheus`` package; skipped without it),
scraping a small exporter with KAI's queue allocation and kube-state-metrics' capacity metrics,
and a replay server that answers recorded query responses of the same HTTP API."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse
from urllib.request import urlopen

from prometheus_client import CollectorRegistry, Gauge, start_http_server

RECORDED = Path(__file__).parent / "recorded"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def exporter(
    allocated: Mapping[str, tuple[float, float, float]], capacity: tuple[float, float, float]
) -> Iterator[int]:
    """Serves ``kai_queue_allocated_*{queue_name}`` (as kai-ray's /metrics does) and
    ``kube_node_status_capacity{resource}`` (as kube-state-metrics does) on a free port."""
    registry = CollectorRegistry()
    names = ("kai_queue_allocated_gpus", "kai_queue_allocated_cpu_cores", "kai_queue_allocated_memory_bytes")
    gauges = [Gauge(n, n, ["queue_name"], registry=registry) for n in names]
    for queue, values in allocated.items():
        for gauge, value in zip(gauges, values, strict=True):
            gauge.labels(queue).set(value)
    node = Gauge("kube_node_status_capacity", "capacity", ["node", "resource"], registry=registry)
    for resource, value in zip(("nvidia_com_gpu", "cpu", "memory"), capacity, strict=True):
        node.labels("n1", resource).set(value)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        yield port
    finally:
        server.shutdown()
        thread.join(5)


@contextmanager
def prometheus(target_port: int, tmp: Path, binary: str) -> Iterator[str]:
    port = free_port()
    config = tmp / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: kai\n    static_configs: [{{targets: ['127.0.0.1:{target_port}']}}]\n"
    )
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urlopen(f"{url}/-/ready", timeout=1) as answer:  # noqa: S310 - loopback only
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("prometheus did not start")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


@contextmanager
def replay(answers: Mapping[str, Any]) -> Iterator[tuple[str, list[str]]]:
    """Answers ``/api/v1/query`` with the recorded body of the same query; yields the URL and
    the queries asked."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            url = urlparse(self.path)
            query = parse_qs(url.query).get("query", [""])[0]
            asked.append(query)
            body = answers.get(query)
            code = 200 if url.path == "/api/v1/query" and body is not None else 400
            payload = json.dumps(body or {"status": "error", "error": f"not recorded: {query}"}).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
