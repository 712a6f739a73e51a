"""``kai-ray dev-cluster`` and ``kai-ray up``: an embedded API server, alone or with the scheduler.

Parsing the command line only: serving is in ``devcluster_serve`` (asyncio and the API server
are imported by the commands that serve, not by every ``kai-ray`` command).

The kubeconfig goes to a cache directory, not the current one (a repository checkout would
otherwise collect untracked kubeconfigs); its path is printed. A port already in use is the
user's to change: one line, exit 2.
"""

from __future__ import annotations

import argparse

from kai_ray.logs import FORMATS, configure


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
            help="where to write a kubeconfig for kubectl and kai-ray run "
            "(default: dev-cluster-<port>.kubeconfig in $XDG_CACHE_HOME/kai-ray, else ~/.cache/kai-ray)",
        )
        parser.add_argument("--taint-nodes", action="store_true", help="give nodes kwok's NoSchedule taint")
        parser.add_argument(
            "--workload-api",
            action="store_true",
            help="serve the Kubernetes Workload API (scheduling.k8s.io/v1beta1 Workload and PodGroup), as 1.37 "
            "does with its GenericWorkload feature gate on",
        )
        parser.add_argument(
            "--event-ttl",
            type=float,
            default=3600.0,
            metavar="SECONDS",
            help="how long an Event lives after its last write, as kube-apiserver's --event-ttl (default 1 h)",
        )
        if name == "up":
            parser.add_argument(
                "--config", help="scheduler config YAML (schema: docs/architecture.md#scheduler-config)"
            )
            parser.add_argument("--metrics-port", type=int, default=8080, help="port of /metrics (0: any free port)")
            parser.add_argument(
                "--no-default-queues",
                action="store_true",
                help="do not create KAI's default-parent-queue / default-queue",
            )
            parser.add_argument("-v", "--verbose", action="store_true", help="log every scheduling decision")
            parser.add_argument("--log-format", choices=FORMATS, default="text", help="text or JSON lines")
            parser.add_argument(
                "--no-default-priority-classes",
                action="store_true",
                help="do not create KAI's priority classes (train, build-preemptible, build, inference)",
            )
        parser.set_defaults(handler=handler)


def run_dev_cluster(args: argparse.Namespace) -> int:
    from kai_ray.app.cli.devcluster_serve import serve_dev_cluster

    return serve_dev_cluster(args, with_scheduler=False)


def run_up(args: argparse.Namespace) -> int:
    from kai_ray.app.cli.devcluster_serve import serve_dev_cluster

    configure(args.verbose, args.log_format)
    return serve_dev_cluster(args, with_scheduler=True)
