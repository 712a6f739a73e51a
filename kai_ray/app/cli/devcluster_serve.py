"""Serving ``kai-ray dev-cluster`` and ``kai-ray up``: the embedded API server, and the scheduler
loop beside it for ``up``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

from kai_ray.app.cli.ports import port_error


def serve_dev_cluster(args: argparse.Namespace, with_scheduler: bool) -> int:
    return asyncio.run(_serve(args, with_scheduler))


def default_kubeconfig(port: int) -> Path:
    """A per-port kubeconfig under the user's cache directory (XDG), never the working tree."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "kai-ray" / f"dev-cluster-{port}.kubeconfig"


async def _serve(args: argparse.Namespace, with_scheduler: bool) -> int:
    from devcluster import DevCluster
    from kai_ray.app.sim.cluster import synthetic_nodes

    cluster = DevCluster(
        nodes=synthetic_nodes(args.nodes, args.taint_nodes), workload_api=args.workload_api, event_ttl=args.event_ttl
    )
    if with_scheduler:
        seed_kai_defaults(cluster, not args.no_default_queues, not args.no_default_priority_classes)
    try:
        url = await cluster.start(args.port, "127.0.0.1")
    except OSError as exc:
        await cluster.stop()
        raise port_error(args.port, "the API server", "--port", exc) from None
    port = int(url.rsplit(":", 1)[1])
    kubeconfig = cluster.write_kubeconfig(args.kubeconfig_out or default_kubeconfig(port))
    print(
        f"dev cluster at {url} with {args.nodes} nodes; use it with:  export KUBECONFIG={Path(kubeconfig).resolve()}",
        file=sys.stderr,
    )
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    scheduler = asyncio.create_task(_scheduler(args, str(kubeconfig))) if with_scheduler else None
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait([t for t in (stopping, scheduler) if t is not None], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if scheduler is not None and not scheduler.done():
            scheduler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await scheduler
        await cluster.stop()
        if not args.kubeconfig_out:  # ours alone: it names a server that is gone now
            Path(kubeconfig).unlink(missing_ok=True)
    if scheduler is not None and scheduler.done() and not scheduler.cancelled():
        scheduler.result()  # the scheduler's own error (e.g. a busy metrics port) ends `up` with it
    return 0


async def _scheduler(args: argparse.Namespace, kubeconfig: str) -> None:
    from k8s_adapter.api import connect
    from k8s_adapter.cache import ClusterCache
    from k8s_adapter.health import serve
    from k8s_adapter.leader import Leadership
    from k8s_adapter.metrics import new_registry
    from k8s_adapter.runner import SchedulerLoop
    from kai_ray.app.cli.output import warn_about
    from kai_ray.app.runtime import in_process_coordinator
    from kai_ray.io.config import load_config

    config = load_config(args.config).for_live_loop()
    warn_about(config)
    api = await connect(kubeconfig)
    registry = new_registry()
    loop = SchedulerLoop(
        api,
        ClusterCache(config.schedulerName, config.migWorkerNodeLabelKey),
        lambda _: in_process_coordinator(config),
        registry,
        Leadership(enabled=False),
        dra=True,  # the dev cluster serves resource.k8s.io/v1
    )
    try:
        server = await serve(registry, args.metrics_port, lambda: True, lambda: loop.state.synced, "127.0.0.1")
    except OSError as exc:
        await api.close()
        raise port_error(args.metrics_port, "/metrics", "--metrics-port", exc) from None
    try:
        await loop.run()
    finally:
        await server.cleanup()
        await api.close()


def seed_kai_defaults(cluster: Any, queues: bool = True, priority_classes: bool = True) -> None:
    """KAI's default queue pair and priority classes, as its chart installs them."""
    from kai_ray import labels as L

    if queues:
        unlimited = {"quota": 0, "limit": -1, "overQuotaWeight": 1}
        resources = {"gpu": unlimited, "cpu": unlimited, "memory": unlimited}
        for name, parent in ((L.DEFAULT_PARENT_QUEUE, None), (L.DEFAULT_QUEUE, L.DEFAULT_PARENT_QUEUE)):
            spec: dict[str, Any] = {"resources": resources, **({"parentQueue": parent} if parent else {})}
            cluster.create("scheduling.run.ai", "v2", "queues", {"metadata": {"name": name}, "spec": spec})
    if priority_classes:
        for name, value, description in L.KAI_PRIORITY_CLASSES:
            cluster.create(
                "scheduling.k8s.io",
                "v1",
                "priorityclasses",
                {"metadata": {"name": name}, "value": value, "globalDefault": False, "description": description},
            )
