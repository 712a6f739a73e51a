"""/metrics after a real scheduling run against the dev cluster: binds, a reclaim, a pod that
cannot fit. What it serves is exactly what docs/metrics.md lists (names, types, labels, origin),
and the values say what happened."""

from __future__ import annotations

import asyncio
import re
import socket
from dataclasses import dataclass

import aiohttp

from k8s_adapter.health import serve
from tests.adapter.conftest import Env, pod, queue, until
from tests.conftest import REPO

PODS = "/api/v1/namespaces/default/pods"
QUEUES = "/apis/scheduling.run.ai/v2/queues"
SECTIONS = {
    "kube-scheduler": lambda name: name.startswith("scheduler_"),
    "KAI": lambda name: name.startswith("kai_") and not name.startswith("kai_ray_"),
    "kai-ray": lambda name: name.startswith("kai_ray_"),
    "Process and runtime (the Prometheus client's collectors)": lambda name: name.startswith(("process_", "python_")),
}


@dataclass(frozen=True)
class Family:
    type: str
    labels: frozenset[str]


def documented() -> dict[str, tuple[str, Family]]:
    """name -> (section, family) from docs/metrics.md's tables."""
    out: dict[str, tuple[str, Family]] = {}
    section = ""
    for line in (REPO / "docs" / "metrics.md").read_text().splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            name = cells[0].strip("`")
            assert name not in out, f"{name} is listed twice"
            labels = frozenset(re.findall(r"`([a-zA-Z_]+)`", cells[2]))
            out[name] = (section, Family(cells[1], labels))
    return out


def served(text: str) -> dict[str, Family]:
    """Families of a Prometheus text exposition: TYPE lines, and the label names of their samples."""
    types: dict[str, str] = {}
    labels: dict[str, set[str]] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            types[name] = kind
            labels[name] = set()
        elif line and not line.startswith("#"):
            sample = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s", line)
            assert sample is not None, line
            name, body = sample.group(1), sample.group(2) or ""
            family = next(f for f in (name, re.sub(r"_(bucket|sum|count)$", "", name)) if f in types)
            labels[family] |= set(re.findall(r'([a-zA-Z_]+)="', body)) - {"le"}
    return {name: Family(kind, frozenset(labels[name])) for name, kind in types.items()}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _bound(env: Env, names: list[str]) -> bool:
    pods = {p["metadata"]["name"]: p for p in env.cluster.objects("", "v1", "pods", "default")}
    return all((pods.get(n) or {}).get("status", {}).get("phase") == "Running" for n in names)


async def test_metrics_after_a_real_run_are_exactly_the_documented_ones(env: Env) -> None:
    await env.create(QUEUES, queue("spare", gpu_quota=0))
    await env.create(QUEUES, queue("owner", gpu_quota=16))
    spare = [f"spare-{i}" for i in range(4)]
    for name in spare:  # fill all 32 GPUs over quota
        await env.create(PODS, pod(name, gpus=8, queue_name="spare"))
    await env.create(QUEUES, queue("capped", gpu_quota=0, gpu_limit=0))
    held = pod("held", gpus=1, queue_name="capped")  # gated, and its queue never has room
    held["spec"]["schedulingGates"] = [{"name": "kai.scheduler/queue-admission"}]
    await env.create(PODS, held)
    loop = env.loop()
    port = _free_port()
    server = await serve(env.registry, port, lambda: True, lambda: loop.state.synced, "127.0.0.1")
    task = asyncio.create_task(loop.run())
    try:
        await until(lambda: _bound(env, spare), timeout=20)
        await env.create(PODS, pod("mine", gpus=8, queue_name="owner"))  # reclaims one spare pod
        await env.create(PODS, pod("huge", gpus=16, queue_name="owner"))  # fits no node, ever
        await until(lambda: _bound(env, ["mine"]), timeout=30)
        await asyncio.sleep(0.5)  # a few more cycles: the metrics step runs after each
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/metrics") as response:
            text = await response.text()
    finally:
        loop.stop()
        await asyncio.wait_for(task, 10)
        await server.cleanup()

    docs, families = documented(), served(text)
    assert sorted(set(families) - set(docs)) == [], "served but not in docs/metrics.md"
    assert sorted(set(docs) - set(families)) == [], "in docs/metrics.md but not served"
    for name, (section, family) in docs.items():
        assert SECTIONS[section](name), f"{name} is listed under {section}"
        assert families[name] == family, f"{name}: docs say {family}, /metrics serves {families[name]}"

    value = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line[:1] != "#"}
    assert value['kai_ray_binds_total{result="ok"}'] == 5
    assert value['scheduler_schedule_attempts_total{profile="kai-scheduler",result="scheduled"}'] == 5
    pending = {q: value[f'scheduler_pending_pods{{queue="{q}"}}'] for q in ("active", "backoff", "unschedulable")}
    assert sum(pending.values()) == 1 and pending["active"] == 0, pending  # huge: tried, or its search backed off
    assert value['scheduler_pending_pods{queue="gated"}'] == 1  # held
    assert value['kai_ray_gated_pods{queue="capped",state="held"}'] == 1
    assert value['kai_ray_gate_removals_total{result="ok"}'] == 0
    assert value['kai_ray_evicted_pods_total{action="reclaim"}'] == 1
    evicted = [k for k in value if k.startswith("kai_pod_group_evicted_pods_total{")]
    assert len(evicted) == 1 and 'action="reclaim"' in evicted[0] and 'namespace="default"' in evicted[0]
    owner = 'queue_display_name="",queue_metadata_name="owner",queue_name="owner"'
    assert value[f"kai_queue_allocated_gpus{{{owner}}}"] == 8
    assert value[f"kai_queue_deserved_gpus{{{owner}}}"] == 16
    assert value["kai_total_preemption_attempts"] == 0  # reclaim is not preempt
