"""Queue usage from a real Prometheus (Debian's ``prometheus``), queried as KAI queries it: an
exporter serves two queues' allocation, Prometheus scrapes it, and the usage kai-ray reads back is
the share each queue had. The default test run checks the same queries against a recording of
this server's answers (tests/timing/test_prometheus_usage.py).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from k8s_adapter.prometheus_usage import PrometheusUsageClient, UsageQueryError
from tests.timing.prometheus_server import exporter, prometheus
from tests.timing.test_prometheus_usage import ALLOCATED, CAPACITY, EXPECTED, _approx, record, usage_config


@pytest.mark.timeout(120)
def test_usage_from_a_real_prometheus(prometheus_binary: str, tmp_path: Path) -> None:
    with exporter(ALLOCATED, CAPACITY) as port, prometheus(port, tmp_path, prometheus_binary) as url:
        client = PrometheusUsageClient(usage_config(url))
        deadline = time.monotonic() + 60
        while True:
            now = time.time()
            try:
                usage = client.fetch(now)
                if set(usage) == set(EXPECTED) and time.monotonic() > deadline - 50:  # a few scrapes in
                    break
            except UsageQueryError:
                pass  # no capacity sample yet
            assert time.monotonic() < deadline, "prometheus never had the samples"
            time.sleep(0.5)
        assert usage == _approx(EXPECTED)
        if os.environ.get("KAI_RAY_RECORD_PROMETHEUS"):
            record(url, client.queries, now, usage)
