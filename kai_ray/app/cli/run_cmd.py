"""``kai-ray run``: the scheduler against a Kubernetes cluster (kubeconfig or in-cluster)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import time
from typing import TYPE_CHECKING

from kai_ray.logs import FORMATS, configure

if TYPE_CHECKING:  # imported while the first lists come (see _main), not to parse a command line
    from k8s_adapter.api import KubeApi
    from kai_ray.config import SchedulerConfig


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("run", help="schedule pods of a Kubernetes cluster")
    parser.add_argument(
        "--kubeconfig",
        default=os.environ.get("KUBECONFIG"),
        help="kubeconfig file (default: $KUBECONFIG, else the in-cluster service account)",
    )
    parser.add_argument("--context", help="kubeconfig context to use")
    parser.add_argument("--config", help="scheduler config YAML (schema: docs/architecture.md#scheduler-config)")
    parser.add_argument("--metrics-port", type=int, default=8080, help="port for /metrics, /healthz, /readyz")
    parser.add_argument("--period", type=float, default=1.0, help="seconds between scheduling cycles")
    parser.add_argument("--shards", type=int, help="shard actors (default: config; 0 = in-process, no Ray)")
    parser.add_argument("--leader-elect", action="store_true", help="run as one of several replicas")
    parser.add_argument("--lease-name", default="kai-ray", help="the coordination.k8s.io Lease to hold")
    parser.add_argument("--lease-namespace", default=os.environ.get("POD_NAMESPACE", "default"))
    parser.add_argument(
        "--lease-duration",
        type=int,
        default=10,
        help="seconds a standby waits for a leader that stopped renewing (a clean stop releases the lease at once)",
    )
    parser.add_argument(
        "--eviction-mode",
        choices=("eviction", "delete"),
        default="eviction",
        help="evict through pods/eviction (respects PodDisruptionBudgets) or delete pods",
    )
    sharing = parser.add_argument_group("GPU sharing (reservation pods, as KAI's binder makes them)")
    sharing.add_argument("--reservation-namespace", default="kai-resource-reservation", help="where they run")
    sharing.add_argument(
        "--reservation-image",
        default="ghcr.io/nvidia/kai-scheduler/resource-reservation:v0.9.3",
        help="the image that reports which GPU the reservation pod got (KAI's resource-reservation)",
    )
    sharing.add_argument("--reservation-service-account", default="kai-resource-reservation")
    sharing.add_argument("--reservation-runtime-class", default="nvidia", help="empty: none")
    sharing.add_argument(
        "--reservation-timeout", type=float, default=40.0, help="seconds to wait for a reservation pod's GPU index"
    )
    parser.add_argument(
        "--dra",
        action="store_true",
        help="Dynamic Resource Allocation: watch resource.k8s.io/v1 slices, classes and claims (Kubernetes 1.34+)",
    )
    parser.add_argument(
        "--pod-grouper",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="create PodGroups for workloads whose pods name none (needs podgroups create and pods patch)",
    )
    parser.add_argument(
        "--mark-disruption-target",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="give a pod a DisruptionTarget condition before evicting it (needs pods/status patch)",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log every decision (bind, pipeline, evict, pending) in one line"
    )
    parser.add_argument("--log-format", choices=FORMATS, default="text", help="text lines, or one JSON object per line")
    parser.set_defaults(handler=run)


def _check_kubeconfig(path: str) -> None:
    """A kubeconfig that cannot work ends here in one line, not in a client library's traceback."""
    from kai_ray.errors import InputError
    from kai_ray.io.documents import read_documents

    if not os.path.isfile(path):
        raise InputError(f"{path}: no such kubeconfig file")
    documents = read_documents(path)
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise InputError(f"{path}: not a kubeconfig (expected one YAML mapping with clusters, users and contexts)")
    for field in ("clusters", "contexts"):
        if not isinstance(documents[0].get(field), list) or not documents[0][field]:
            raise InputError(f"{path}: {field}: missing or empty; not a usable kubeconfig")


def run(args: argparse.Namespace) -> int:
    configure(args.verbose, args.log_format)
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a dependency; asyncio's loop works too
        pass
    import asyncio  # here, not at the top: the one-shot commands never pay for it

    return asyncio.run(_main(args))


# What the loop needs beyond the API client: imported while the first lists are on their way.
SCHEDULER_MODULES = (
    "k8s_adapter.cache",
    "k8s_adapter.gpu_sharing",
    "k8s_adapter.health",
    "k8s_adapter.leader",
    "k8s_adapter.metrics",
    "k8s_adapter.runner",
    "k8s_adapter.usage_feeds",
    "kai_ray.app.runtime",
)


def _prepare(args: argparse.Namespace) -> SchedulerConfig:
    """The configuration, read and checked (its warnings printed), and the rest of the scheduler
    imported. About a second of CPU, spent while the API server sends the first lists."""
    import importlib

    from kai_ray.app.cli.output import warn_about
    from kai_ray.io.config import load_config

    config = load_config(args.config)
    warn_about(config)
    for name in SCHEDULER_MODULES:
        importlib.import_module(name)
    return config.for_live_loop()


async def _connect(args: argparse.Namespace) -> KubeApi:
    from k8s_adapter.api import connect
    from kai_ray.errors import InputError

    try:
        return await connect(args.kubeconfig, args.context)
    except Exception as exc:
        if args.kubeconfig:  # a kubeconfig that cannot work: say what is wrong with the file itself
            _check_kubeconfig(args.kubeconfig)
        if isinstance(exc, InputError):
            raise  # already one line that says what is wrong
        # the client's config errors (ConfigException, file, YAML): one line, exit 2
        where = args.kubeconfig or "in-cluster config (no --kubeconfig or $KUBECONFIG given)"
        raise InputError(
            f"{where}: cannot connect: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None


async def _main(args: argparse.Namespace) -> int:
    import asyncio

    from k8s_adapter.watches import Watches

    api = await _connect(args)
    # The lists start now, with only the client imported: the API server encodes them while this
    # process reads its configuration and imports the rest of the scheduler, not after that. The
    # loop's cache takes what they brought meanwhile.
    watches = Watches(api, dra=args.dra)
    watches.start()
    try:
        config = await asyncio.to_thread(_prepare, args)
    except BaseException:
        await watches.close()
        await api.close()
        raise

    from k8s_adapter.cache import ClusterCache
    from k8s_adapter.gpu_sharing import ReservationSettings
    from k8s_adapter.health import serve, stalled_after
    from k8s_adapter.leader import Leadership
    from k8s_adapter.metrics import new_registry
    from k8s_adapter.runner import SchedulerLoop
    from k8s_adapter.usage_feeds import make_feed
    from kai_ray.app.cli.ports import port_error
    from kai_ray.app.runtime import make_coordinator

    registry = new_registry()
    leadership = Leadership(enabled=args.leader_elect, lease_duration=args.lease_duration)
    loop = SchedulerLoop(
        api,
        ClusterCache(config.schedulerName, config.migWorkerNodeLabelKey),
        lambda nodes: make_coordinator(config, nodes, args.shards),
        registry,
        leadership,
        period=args.period,
        eviction_mode=args.eviction_mode,
        reservations=ReservationSettings(
            namespace=args.reservation_namespace,
            image=args.reservation_image,
            service_account=args.reservation_service_account,
            runtime_class=args.reservation_runtime_class,
            timeout=args.reservation_timeout,
        ),
        dra=args.dra,
        usage=make_feed(config.usageDBConfig, api) if config.usageDBConfig else None,
        pod_grouper=args.pod_grouper,
        mark_disruption_target=args.mark_disruption_target,
        watches=watches,
    )
    alive = stalled_after(max(60.0, 30 * args.period), lambda: loop.state.last_iteration)
    # A failed cycle (a shard actor died, say) fails the check until cycles succeed again and for a
    # few seconds more, so that a probe or an operator polling now and then still sees it.
    recently = max(5.0, 5 * args.period)
    try:
        server = await serve(
            registry,
            args.metrics_port,
            lambda: alive() and loop.state.cycle_ok and time.monotonic() - loop.state.cycle_failed_at > recently,
            lambda: loop.state.synced and loop.coordinator_health.deciding,
        )
    except OSError as exc:
        await watches.close()
        await api.close()
        raise port_error(args.metrics_port, "/metrics", "--metrics-port", exc) from None
    stop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        stop.add_signal_handler(sig, loop.stop)
    election = asyncio.create_task(leadership.campaign(api.client, args.lease_name, args.lease_namespace))

    def election_ended(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            logging.getLogger("kai-ray").error("leader election stopped: %s", task.exception())
            loop.stop()  # never keep running without a working election

    election.add_done_callback(election_ended)
    try:
        await loop.run()
    finally:
        election.cancel()
        await asyncio.gather(election, return_exceptions=True)
        await leadership.release(api, args.lease_name, args.lease_namespace)  # only if it still holds it
        await server.cleanup()
        await api.close()
    return 1 if loop.state.gave_up else 0  # gave up: a restart (or the standby) takes over
