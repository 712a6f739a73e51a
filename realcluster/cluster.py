"""A real control plane on loopback: etcd, kube-apiserver and, as asked, kube-controller-manager,
kube-scheduler and kwok, each its own process (and process group) with a log file.

    with RealCluster(ClusterOptions(controllers=True, kwok=True)) as cluster:
        cluster.kubeconfig("admin")   # a kubeconfig file with the admin's bearer token

The apiserver serves TLS on a free loopback port with a certificate of our own CA, authenticates
static bearer tokens and ServiceAccount tokens, and authorizes with RBAC. ``stop()`` ends every
process it started (TERM, then KILL after a grace period) and checks that none is left.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import yaml

from realcluster import kwok
from realcluster.build import ensure_built, ensure_workload_api_built
from realcluster.pki import Pki, make_pki

SERVICE_RANGE = "10.96.0.0/16"
ISSUER = "https://kubernetes.default.svc.cluster.local"
KCM_CONTROLLERS = (  # what a cluster of bare pods needs; none for workloads we never create
    "node-lifecycle-controller",  # lifts the not-ready taint the apiserver puts on every new node
    "disruption-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "garbage-collector-controller",
    "root-ca-certificate-publisher-controller",
)


# The Workload API: its feature gate (beta in 1.37, off by default) and its group version (a beta
# API, so off by default too since 1.24).
WORKLOAD_API_GATE = "GenericWorkload"
WORKLOAD_API_VERSION = "scheduling.k8s.io/v1beta1"


class ClusterError(RuntimeError):
    """A component failed to start or answer; the message carries the end of its log."""


@dataclass(frozen=True, slots=True)
class ClusterOptions:
    controllers: bool = False  # kube-controller-manager (PodDisruptionBudget status, namespaces, service accounts)
    kwok: bool = True
    kube_scheduler: bool = False
    node_lease_seconds: int = 0  # kwok renews node Leases and heartbeats node status when > 0
    compaction_seconds: int = 300  # the apiserver's etcd compaction interval (its default is 5 minutes)
    audit_users: tuple[str, ...] = ()  # log these users' requests (Metadata level) to audit.log
    scheduler_qps: float = 5000.0  # kube-scheduler's client rate limit (its default, 50/s, would throttle binds)
    extra_apiserver_args: tuple[str, ...] = ()
    # Serve the Kubernetes Workload API: kube-apiserver of the release built by
    # ``python -m realcluster.build --workload-api`` (1.37) with the GenericWorkload feature gate on
    # and scheduling.k8s.io/v1beta1 enabled; etcd, kwok and the other components stay as built.
    workload_api: bool = False


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Process:
    name: str
    command: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    env: dict[str, str] | None = None  # added to this process's environment

    def start(self) -> None:
        sink = self.log.open("ab")
        try:
            self.popen = subprocess.Popen(
                self.command,
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, **self.env} if self.env else None,
            )
        finally:
            sink.close()

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    def stop(self, grace: float = 10.0) -> None:
        """TERM the process group, KILL it after ``grace`` seconds; reap the process."""
        if self.popen is None:
            return
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):  # stragglers of its group, if any
            os.killpg(self.popen.pid, signal.SIGKILL)


@dataclass
class RealCluster:
    options: ClusterOptions = field(default_factory=ClusterOptions)
    keep: bool = False  # leave the directory (logs, kubeconfigs) behind

    def __post_init__(self) -> None:
        self.bin = Path()
        self.apiserver_bin = Path()
        self.dir = Path()
        self.pki: Pki | None = None
        self.etcd_port = self.peer_port = self.port = 0
        self.processes: dict[str, Process] = {}
        self.started_at = 0.0

    # ------------------------------------------------------------------ addresses and credentials
    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    def _pki(self) -> Pki:
        if self.pki is None:
            raise ClusterError("the cluster has not been started")
        return self.pki

    def kubeconfig(self, who: str = "admin", token: str | None = None, name: str | None = None) -> Path:
        """A kubeconfig file for a static identity (admin, scheduler, controllers, kwok) or ``token``."""
        pki = self._pki()
        path = self.dir / f"{name or who}.kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "e2e", "cluster": {"server": self.url, "certificate-authority": str(pki.ca_cert)}}],
            "users": [{"name": name or who, "user": {"token": token or pki.token(who)}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": name or who}}],
            "current-context": "e2e",
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self._pki().ca_cert))

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 120.0) -> RealCluster:
        self.bin = ensure_built()
        self.apiserver_bin = ensure_workload_api_built() if self.options.workload_api else self.bin
        self.dir = Path(tempfile.mkdtemp(prefix="kai-ray-e2e-"))
        self.pki = make_pki(self.dir / "pki")
        self.etcd_port, self.peer_port, self.port = free_port(), free_port(), free_port()
        atexit.register(self.stop)
        self.started_at = time.monotonic()
        try:
            self._start("etcd", self._etcd_command())
            self._wait(lambda: self._http_ok(f"{self.etcd_url}/health"), "etcd", timeout)
            self._start("kube-apiserver", self._apiserver_command())
            self.wait_ready(timeout)
            if self.options.controllers:
                self._start("kube-controller-manager", self._controller_command())
            if self.options.kube_scheduler:
                self._start("kube-scheduler", self._scheduler_command())
            if self.options.kwok:
                # kwok manages a node only through a node stage; without leases a slow heartbeat does
                # (5,000 nodes every ~10 minutes is a few writes a second).
                heartbeat = self.options.node_lease_seconds // 4 or 600
                config = kwok.write_config(self.dir / "kwok.yaml", heartbeat)
                self._start("kwok", self._kwok_command(config))
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Every process ends (dependents first); raises if one outlives KILL."""
        for name in reversed(list(self.processes)):
            self.processes[name].stop()
        left = [p.name for p in self.processes.values() if p.alive()]
        self.processes.clear()
        if self.dir != Path() and not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        if left:
            raise ClusterError(f"processes still running after stop: {', '.join(left)}")

    def restart_apiserver(self, timeout: float = 120.0) -> None:
        """Stop kube-apiserver and start it again on the same port, etcd and credentials.

        Watches break; the new apiserver's watch cache starts at etcd's current revision, so a
        client resuming from an older resourceVersion is told 410 Gone, as after a rollout.
        """
        apiserver = self.processes["kube-apiserver"]
        apiserver.stop()
        apiserver.start()
        self.wait_ready(timeout)

    def pids(self) -> dict[str, int]:
        return {name: p.popen.pid for name, p in self.processes.items() if p.popen is not None}

    def __enter__(self) -> RealCluster:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ readiness
    def _start(self, name: str, command: list[str]) -> None:
        process = Process(name, command, self.dir / f"{name}.log")
        self.processes[name] = process
        process.start()

    def _http_ok(self, url: str, token: str | None = None) -> bool:
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
        context = self.ssl_context() if url.startswith("https") else None
        try:
            with urllib.request.urlopen(request, timeout=5, context=context) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout: float = 120.0) -> None:
        token = self._pki().token("admin")
        self._wait(lambda: self._http_ok(f"{self.url}/readyz", token), "kube-apiserver", timeout)

    def _wait(self, check: object, name: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if callable(check) and check():
                return
            process = self.processes.get(name)
            if process is not None and not process.alive():
                raise ClusterError(f"{name} exited during start-up:\n{process.tail()}")
            if time.monotonic() > deadline:
                raise ClusterError(f"{name} not ready after {timeout:.0f}s:\n{process.tail() if process else ''}")
            time.sleep(0.2)

    # ------------------------------------------------------------------ command lines
    def _etcd_command(self) -> list[str]:
        peer = f"http://127.0.0.1:{self.peer_port}"
        return [
            str(self.bin / "etcd"),
            "--name=e2e",
            f"--data-dir={self.dir / 'etcd'}",
            f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=e2e={peer}",
            "--unsafe-no-fsync",  # a throwaway data dir: durability buys nothing here, fsync costs
            "--quota-backend-bytes=8589934592",
            "--log-level=warn",
        ]

    def _audit_policy(self) -> Path:
        rules: list[dict[str, object]] = []
        if self.options.audit_users:
            rules.append(
                {"level": "Metadata", "users": list(self.options.audit_users), "omitStages": ["RequestReceived"]}
            )
        rules.append({"level": "None"})
        path = self.dir / "audit-policy.yaml"
        path.write_text(yaml.safe_dump({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": rules}))
        return path

    def _apiserver_command(self) -> list[str]:
        pki = self._pki()
        command = [
            str(self.apiserver_bin / "kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--token-auth-file={pki.token_file}",
            "--authorization-mode=RBAC",
            "--anonymous-auth=false",
            f"--service-account-issuer={ISSUER}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-cluster-ip-range={SERVICE_RANGE}",
            f"--etcd-compaction-interval={self.options.compaction_seconds}s",
            f"--cert-dir={self.dir / 'apiserver-certs'}",
            "--profiling=false",
            "--v=1",
        ]
        if self.options.workload_api:
            command += [
                f"--feature-gates={WORKLOAD_API_GATE}=true",
                f"--runtime-config={WORKLOAD_API_VERSION}=true",
                # 1.37 refuses a loopback advertise address while it keeps the `kubernetes`
                # Service's endpoints; nothing here reaches the apiserver through that Service.
                "--endpoint-reconciler-type=none",
            ]
        if self.options.audit_users:
            command += [
                f"--audit-policy-file={self._audit_policy()}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-mode=blocking",
            ]
        return command + list(self.options.extra_apiserver_args)

    @property
    def audit_log(self) -> Path:
        return self.dir / "audit.log"

    def _controller_command(self) -> list[str]:
        pki = self._pki()
        return [
            str(self.bin / "kube-controller-manager"),
            f"--kubeconfig={self.kubeconfig('controllers')}",
            f"--controllers={','.join(KCM_CONTROLLERS)}",
            "--leader-elect=false",
            "--secure-port=0",
            f"--root-ca-file={pki.ca_cert}",
            f"--service-account-private-key-file={pki.sa_key}",
            "--use-service-account-credentials=true",  # each controller as its own account, as clusters run it
            "--v=1",
        ]

    def _scheduler_command(self) -> list[str]:
        return self.kube_scheduler_command("scheduler")

    def kube_scheduler_command(self, identity: str) -> list[str]:
        """kube-scheduler as ``identity``, its client rate limit raised to ``options.scheduler_qps``."""
        qps = self.options.scheduler_qps
        config = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(self.kubeconfig(identity)), "qps": qps, "burst": int(2 * qps)},
            "leaderElection": {"leaderElect": False},
        }
        path = self.dir / "kube-scheduler.yaml"
        path.write_text(yaml.safe_dump(config))
        return [str(self.bin / "kube-scheduler"), f"--config={path}", "--secure-port=0", "--v=1"]

    def _kwok_command(self, config: Path) -> list[str]:
        return [
            str(self.bin / "kwok"),
            f"--kubeconfig={self.kubeconfig('kwok')}",
            f"--config={config}",
            f"--manage-nodes-with-annotation-selector={kwok.MANAGED_NODES}",
            f"--node-lease-duration-seconds={self.options.node_lease_seconds}",
            "--cidr=10.128.0.1/9",  # room for every pod of the load test
            "--node-ip=10.0.0.1",
        ]
