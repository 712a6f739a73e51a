"""``kai-ray dev-cluster`` and ``kai-ray up``: an embedded API server, alone or with the scheduler."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path


def add_parsers(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, help_text, handler in (
        ("dev-cluster", "serve an embedded Kubernetes-API-compatible cluster with synthetic nodes", run_dev_cluster),
        ("up", "the dev cluster and the scheduler together, for trying kai-ray with kubectl", run_up),
    ):
        parser = subparsers.add_parser(name, help=help_text)
        parser.add_argument("--port", type=int, default=6443, help="port of the API server (0: any free port)")
        parser.add_argument("--nodes", type=int, default=8, help="synthetic kwok-style nodes to create")
        parser.add_argument(
            "--kubeconfig-out",
            default="kai-ray-dev.kubeconfig",
            help="where to write a kubeconfig for kubectl and kai-ray run",
        )
        parser.add_argument("--taint-nodes", action="store_true", help="give nodes kwok's NoSchedule taint")
        if name == "up":
            parser.add_argument(
                "--config", help="scheduler config YAML (schema: docs/architecture.md#scheduler-config)"
            )
            parser.add_argument("--metrics-port", type=int, default=8080)
            parser.add_argument(
                "--no-default-queues",
                action="store_true",
                help="do not create KAI's default-parent-queue / default-queue",
            )
        parser.set_defaults(handler=handler)


def run_dev_cluster(args: argparse.Namespace) -> int:
    return asyncio.run(_serve(args, with_scheduler=False))


def run_up(args: argparse.Namespace) -> int:
    return asyncio.run(_serve(args, with_scheduler=True))


async def _serve(args: argparse.Namespace, with_scheduler: bool) -> int:
    from devcluster import DevCluster
    from kai_ray.sim.cluster import synthetic_nodes

    cluster = DevCluster(nodes=synthetic_nodes(args.nodes, args.taint_nodes))
    if with_scheduler and not args.no_default_queues:
        _default_queues(cluster)
    url = await cluster.start(args.port, "127.0.0.1")
    kubeconfig = cluster.write_kubeconfig(args.kubeconfig_out)
    print(
        f"dev cluster at {url} with {args.nodes} nodes; use it with:  export KUBECONFIG={Path(kubeconfig).resolve()}",
        file=sys.stderr,
    )
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    scheduler = None
    if with_scheduler:
        scheduler = asyncio.create_task(_scheduler(args, str(kubeconfig), stop))
    await stop.wait()
    if scheduler is not None:
        scheduler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await scheduler
    await cluster.stop()
    return 0


async def _scheduler(args: argparse.Namespace, kubeconfig: str, stop: asyncio.Event) -> None:
    from prometheus_client import CollectorRegistry

    from k8s_adapter.api import connect
    from k8s_adapter.cache import ClusterCache
    from k8s_adapter.health import serve
    from k8s_adapter.leader import Leadership
    from k8s_adapter.runner import SchedulerLoop
    from kai_ray.io.config import load_config
    from kai_ray.runtime import in_process_coordinator

    config = load_config(args.config)
    api = await connect(kubeconfig)
    registry = CollectorRegistry()
    loop = SchedulerLoop(
        api,
        ClusterCache(config.schedulerName),
        lambda _: in_process_coordinator(config),
        registry,
        Leadership(enabled=False),
    )
    server = await serve(registry, args.metrics_port, lambda: True, lambda: loop.state.synced, "127.0.0.1")
    try:
        await loop.run()
    finally:
        await server.cleanup()
        await api.close()


def _default_queues(cluster: object) -> None:
    from devcluster import DevCluster

    assert isinstance(cluster, DevCluster)
    unlimited = {"quota": 0, "limit": -1, "overQuotaWeight": 1}
    resources = {"gpu": unlimited, "cpu": unlimited, "memory": unlimited}
    cluster.create(
        "scheduling.run.ai",
        "v2",
        "queues",
        {"metadata": {"name": "default-parent-queue"}, "spec": {"resources": resources}},
    )
    cluster.create(
        "scheduling.run.ai",
        "v2",
        "queues",
        {
            "metadata": {"name": "default-queue"},
            "spec": {"parentQueue": "default-parent-queue", "resources": resources},
        },
    )
