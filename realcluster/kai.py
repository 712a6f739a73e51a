"""KAI Scheduler itself on a RealCluster, started as KAI's chart and operator configure it.

    with RealCluster(ClusterOptions(controllers=True, kwok=True)) as cluster, KaiDeployment(cluster) as kai:
        ...  # pods with schedulerName kai-scheduler and label kai.scheduler/queue get scheduled by KAI

What a Helm install of KAI v0.12 does, done here without Helm or the operator:

- KAI's CRDs (the chart's ``crds/``: Queue, PodGroup, BindRequest, Topology, Config,
  SchedulingShard), read from the module the build used (``realcluster.build`` copies them
  into the cache); a CRD of the same name already there (kai-ray's chart's Queue and PodGroup)
  is replaced by KAI's;
- the chart's priority classes (train 50, build-preemptible 75, build 100, inference 125), its
  default queues (``default-parent-queue`` and its child ``default-queue``, no quota, no limit),
  the release namespace ``kai-scheduler`` and the reservation namespace
  ``kai-resource-reservation``;
- the five processes the operator runs as Deployments for the default ``Config`` and
  ``SchedulingShard``, with the arguments its operands render (``pkg/operator/operands/*/
  resources*.go``): the scheduler (``--scheduler-conf`` the operator's default configuration,
  ``realcluster/kai-scheduler-config.yaml``; ``GOGC=400`` as the operator sets it), the binder
  (binds the scheduler's BindRequests), the podgrouper (a PodGroup for each pod), the
  podgroupcontroller (PodGroup status) and the queuecontroller (Queue status).

Each process runs with the cluster's admin kubeconfig (``system:masters``), so none of KAI's
RBAC objects is needed. What differs from the operator's Deployments, and why:

- every metrics and health address is a free port on loopback instead of ``:8080``/``:8081``
  (several clusters share a machine), except the scheduler's plugin server, which KAI binds on
  every interface: it gets a free port;
- the queuecontroller's and podgroupcontroller's validating webhooks are off
  (``--enable-webhook=false``, ``--enable-podgroup-webhook=false``): the apiserver would need a
  webhook configuration and serving certificates for them, and they only validate;
- no admission webhook (it sets GPU pods' runtimeClassName to ``nvidia``, which kwok has no
  use for), no resource-reservation pods (GPU sharing only), no operator, no node scale
  adjuster (off by default), no Prometheus (no usage DB by default).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from realcluster.build import build_record, ensure_kai_built
from realcluster.cluster import ClusterError, Process, RealCluster, free_port

CONFIG = Path(__file__).resolve().with_name("kai-scheduler-config.yaml")
SCHEDULER_NAME = "kai-scheduler"  # constants.DefaultSchedulerName
NAMESPACE = "kai-scheduler"  # the release namespace of KAI's install instructions
RESERVATION_NAMESPACE = "kai-resource-reservation"  # constants.DefaultResourceReservationName
SCALE_ADJUST_NAMESPACE = "kai-scale-adjust"  # constants.DefaultScaleAdjustName
QUEUE_LABEL = "kai.scheduler/queue"  # constants.DefaultQueueLabel
NODE_POOL_LABEL = "kai.scheduler/node-pool"  # constants.DefaultNodePoolLabelKey
# The chart's default image for reservation pods; never pulled here (no GPU sharing, kwok nodes).
RESERVATION_IMAGE = "registry/local/kai-scheduler/resourcereservation:v0.12.0"
# Started in this order (the scheduler last: what it asks for is handled by the others), stopped in reverse.
COMPONENTS = ("podgrouper", "podgroupcontroller", "queuecontroller", "binder", "scheduler")
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
UNLIMITED = {"quota": 0, "limit": -1, "overQuotaWeight": 1}


class KaiError(ClusterError):
    """A KAI component failed to start or died; the message carries the end of its log."""


@dataclass(frozen=True, slots=True)
class KaiOptions:
    config: Path = CONFIG  # the scheduler's --scheduler-conf
    schedule_period: str = ""  # the scheduler's --schedule-period ("" keeps KAI's 1s)
    scheduler_verbosity: int | None = None  # the scheduler's -v (None keeps KAI's 3)
    default_queues: bool = True  # the chart's default-parent-queue and default-queue
    extra_args: dict[str, tuple[str, ...]] = field(default_factory=dict)  # component -> more arguments


@dataclass
class Component:
    name: str
    process: Process
    health: str  # an http URL that answers 200 once the component is up


@dataclass
class KaiDeployment:
    cluster: RealCluster
    options: KaiOptions = field(default_factory=KaiOptions)

    def __post_init__(self) -> None:
        self.bin = Path()
        self.deploy = Path()
        self.dir = Path()
        self.components: dict[str, Component] = {}
        self.versions: dict[str, str] = {}

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 120.0, components: Sequence[str] = COMPONENTS) -> KaiDeployment:
        """Install KAI's cluster objects, start the five components (or ``components`` of them)
        and wait until each answers. A component left out can be started later with
        ``start_component``: a load test keeps the scheduler off while its pods are created, as
        KAI's own scale tests do, with the podgrouper grouping them meanwhile."""
        if self.cluster.pki is None:
            raise KaiError("start the cluster before KAI")
        self.bin = ensure_kai_built()
        self.deploy = self.bin.parent / "deploy"
        versions = build_record(self.bin).get("versions")
        self.versions = dict(versions) if isinstance(versions, dict) else {}
        self.dir = self.cluster.dir / "kai"
        self.dir.mkdir(exist_ok=True)
        atexit.register(self.stop)
        try:
            self.install(timeout)
            for name in COMPONENTS:
                if name in components:
                    self._launch(name)
            for component in self.components.values():
                self._wait(component, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def start_component(self, name: str, timeout: float = 120.0) -> None:
        """Start one component of a deployment already started (its log is appended to) and
        wait until it answers."""
        if name in self.components:
            raise KaiError(f"KAI's {name} is running already")
        self._wait(self._launch(name), timeout)

    def stop_component(self, name: str) -> None:
        """Stop one component (TERM, KILL after 10 s); the others keep running."""
        component = self.components.pop(name)
        component.process.stop()
        if component.process.alive():
            raise KaiError(f"KAI's {name} still running after stop")

    def _launch(self, name: str) -> Component:
        kubeconfig = str(self.cluster.kubeconfig("admin", name="kai-admin"))
        command, health, env = self._command(name)
        command += list(self.options.extra_args.get(name, ()))
        process = Process(name, command, self.dir / f"{name}.log", env={"KUBECONFIG": kubeconfig, **env})
        self.components[name] = Component(name, process, health)
        process.start()
        return self.components[name]

    def stop(self) -> None:
        """Every component ends (the scheduler first); raises if one outlives KILL. Logs stay in ``dir``."""
        for name in reversed(list(self.components)):
            self.components[name].process.stop()
        left = [c.name for c in self.components.values() if c.process.alive()]
        self.components.clear()
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        if left:
            raise KaiError(f"KAI processes still running after stop: {', '.join(left)}")

    def __enter__(self) -> KaiDeployment:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ health and logs
    def alive(self) -> dict[str, bool]:
        return {name: c.process.alive() for name, c in self.components.items()}

    def check(self) -> None:
        """Raise KaiError, with the end of its log, for every component that has exited."""
        dead = [c for c in self.components.values() if not c.process.alive()]
        if dead:
            raise KaiError("\n".join(f"KAI's {c.name} exited:\n{c.process.tail()}" for c in dead))

    def pids(self) -> dict[str, int]:
        return {n: c.process.popen.pid for n, c in self.components.items() if c.process.popen is not None}

    def logs(self) -> dict[str, Path]:
        return {name: c.process.log for name, c in self.components.items()}

    def tails(self, lines: int = 20) -> str:
        return "\n".join(f"--- {name}\n{c.process.tail(lines)}" for name, c in self.components.items())

    # ------------------------------------------------------------------ cluster objects
    def install(self, timeout: float = 60.0) -> None:
        """KAI's CRDs (replacing any of the same name), namespaces, priority classes and default queues."""
        crds = documents(sorted((self.deploy / "crds").glob("*.yaml")))
        for crd in crds:
            self._create_or_replace(CRDS, crd)
        for namespace in (NAMESPACE, RESERVATION_NAMESPACE):
            self._create(
                "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )
        for priority_class in documents(sorted((self.deploy / "priorityclasses").glob("*.yaml"))):
            self._create("/apis/scheduling.k8s.io/v1/priorityclasses", priority_class)
        _until(
            lambda: all(self._established(crd["metadata"]["name"]) for crd in crds), timeout, "KAI's CRDs established"
        )
        if self.options.default_queues:
            for queue in default_queues():
                self._create("/apis/scheduling.run.ai/v2/queues", queue)

    def _established(self, name: str) -> bool:
        found = self.request("GET", f"{CRDS}/{name}")
        conditions = {c["type"]: c["status"] for c in (found.get("status") or {}).get("conditions") or []}
        return conditions.get("Established") == "True"

    def _create(self, path: str, obj: dict[str, Any]) -> None:
        try:
            self.request("POST", path, obj)
        except urllib.error.HTTPError as error:
            if error.code != 409:
                raise

    def _create_or_replace(self, path: str, obj: dict[str, Any]) -> None:
        try:
            self.request("POST", path, obj)
        except urllib.error.HTTPError as error:
            if error.code != 409:
                raise
            current = self.request("GET", f"{path}/{obj['metadata']['name']}")
            replacement = json.loads(json.dumps(obj))
            replacement["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            self.request("PUT", f"{path}/{obj['metadata']['name']}", replacement)

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """One call to the apiserver as the admin; HTTPError for an error status."""
        data = json.dumps(body).encode() if body is not None else None
        if self.cluster.pki is None:
            raise KaiError("the cluster has not been started")
        headers = {"Authorization": f"Bearer {self.cluster.pki.token('admin')}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.cluster.url + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=30, context=self.cluster.ssl_context()) as response:
            loaded: dict[str, Any] = json.loads(response.read() or b"{}")
            return loaded

    # ------------------------------------------------------------------ command lines
    def _command(self, name: str) -> tuple[list[str], str, dict[str, str]]:
        """(command, health URL, extra environment) of one component, as the operator renders it
        for the default Config, with loopback addresses for what it binds."""
        binary = str(self.bin / name)
        metrics, probe = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
        if name == "scheduler":
            command = [
                binary,
                f"--scheduler-conf={self.options.config}",
                f"--scheduler-name={SCHEDULER_NAME}",
                f"--namespace={NAMESPACE}",
                f"--nodepool-label-key={NODE_POOL_LABEL}",
                "--partition-label-value=",
                f"--resource-reservation-app-label={RESERVATION_NAMESPACE}",
                f"--listen-address={metrics}",
                f"--plugin-server-port={free_port()}",  # KAI binds it on every interface
            ]
            if self.options.schedule_period:
                command.append(f"--schedule-period={self.options.schedule_period}")
            if self.options.scheduler_verbosity is not None:
                command.append(f"--v={self.options.scheduler_verbosity}")
            return command, f"http://{metrics}/metrics", {"GOGC": "400"}
        if name == "binder":
            command = [
                binary,
                *("--scheduler-name", SCHEDULER_NAME),
                *("--resource-reservation-namespace", RESERVATION_NAMESPACE),
                *("--resource-reservation-service-account", RESERVATION_NAMESPACE),
                *("--resource-reservation-app-label", RESERVATION_NAMESPACE),
                *("--resource-reservation-pod-image", RESERVATION_IMAGE),
                *("--scale-adjust-namespace", SCALE_ADJUST_NAMESPACE),
                *("--health-probe-bind-address", probe),
                *("--metrics-bind-address", metrics),
                "--cdi-enabled=false",
                *("--qps", "20", "--burst", "100"),  # the operator's client defaults for the binder
                "--runtime-class-name=nvidia",
            ]
            return command, f"http://{metrics}/metrics", {}  # its health server has no checks: 404
        if name == "podgrouper":
            command = [
                binary,
                *("--scheduler-name", SCHEDULER_NAME),
                *("--queue-label-key", QUEUE_LABEL),
                *("--nodepool-label-key", NODE_POOL_LABEL),
                f"--metrics-bind-address={metrics}",
                f"--health-probe-bind-address={probe}",
            ]
            return command, f"http://{probe}/readyz", {}
        if name == "podgroupcontroller":
            command = [
                binary,
                *("--scheduler-name", SCHEDULER_NAME),
                f"--metrics-bind-address={metrics}",
                f"--health-probe-bind-address={probe}",
                "--enable-podgroup-webhook=false",
            ]
            return command, f"http://{probe}/readyz", {}
        if name == "queuecontroller":
            command = [
                binary,
                *("--queue-label-key", QUEUE_LABEL),
                *("--metrics-listen-address", metrics),
                "--enable-webhook=false",
            ]
            return command, f"http://{metrics}/metrics", {}
        raise ValueError(f"no KAI component {name!r}")

    def _wait(self, component: Component, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not _http_ok(component.health):
            if not component.process.alive():
                raise KaiError(f"KAI's {component.name} exited during start-up:\n{component.process.tail()}")
            if time.monotonic() > deadline:
                raise KaiError(f"KAI's {component.name} not up after {timeout:.0f}s:\n{component.process.tail()}")
            time.sleep(0.2)


def documents(paths: list[Path]) -> list[dict[str, Any]]:
    """Every YAML document of ``paths`` that is an object (the files' comments and ``---`` aside)."""
    found: list[dict[str, Any]] = []
    for path in paths:
        found.extend(doc for doc in yaml.safe_load_all(path.read_text()) if isinstance(doc, dict))
    return found


def default_queues() -> list[dict[str, Any]]:
    """The chart's default queues (templates/default-queue.yaml with its default values)."""
    resources = {"cpu": dict(UNLIMITED), "gpu": dict(UNLIMITED), "memory": dict(UNLIMITED)}
    parent = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "default-parent-queue"}}
    child = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "default-queue"}}
    return [
        {**parent, "spec": {"resources": resources}},
        {**child, "spec": {"parentQueue": "default-parent-queue", "resources": resources}},
    ]


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise KaiError(f"not in {timeout:.0f}s: {what}")
        time.sleep(0.2)
