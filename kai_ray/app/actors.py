"""Ray at the edges: the plain ``Shard`` and ``Coordinator`` classes as Ray actors.

This is the only module that imports Ray. Every call's arguments and answer travel packed
(``kai_ray.app.wire``). ``RayTransport`` delivers the shard client's batches to shard actors
(every round is submitted to every shard at once, then awaited) and reports an actor that died,
failed a batch or did not answer in time as ``ShardDown``; ``RemoteCoordinator`` gives callers
the same methods as ``Coordinator`` while the work happens in the coordinator actor, whose
results come back as what changed since the last one (``coordinator.result_changes``), and
replaces that actor when it dies.

Where actors run: Ray spreads the shard actors over the cluster's nodes. A new one (a
replacement, or a shard added) avoids for a while the nodes where a shard actor was lost, since
Ray takes some seconds to find a lost node dead, and prefers a node that hosts no shard actor
yet. The coordinator actor runs on the node of the process that made it (the adapter's), and
nowhere else.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Iterator, Mapping
from typing import Any

from coordinator.coordinator import Coordinator
from coordinator.replaceable import CoordinatorHost, HostGone, ReplaceableCoordinator
from coordinator.shard_set import ShardSet
from kai_ray.app.round_timeout import answer_timeout
from kai_ray.app.wire import pack, unpack
from kai_ray.config import DEFAULT_SHARD_ROUND_TIMEOUT, SchedulerConfig
from kai_ray.heap import HeapTrimmer
from placement.placer import PlacementPolicy
from shards.protocol import Batch, BatchReply, ShardDown
from shards.shard import Shard


def ensure_ray(num_cpus: int | None = None, address: str | None = None) -> None:
    """Start a Ray instance of this process's own (or join one, with ``address`` / RAY_ADDRESS), quietly."""
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    # Ray keeps an event record of every task and actor call in the GCS for its dashboard, up to
    # 100,000 of them: a scheduler that calls its actors every cycle fills that, about 100 MB of
    # gcs_server per 30,000 calls measured, and nothing here reads it. Off, unless the user says
    # otherwise; an instance joined by address keeps its own setting.
    os.environ.setdefault("RAY_task_events_report_interval_ms", "0")
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
        return
    # Without an address Ray joins any instance already running on this machine (the newest, if
    # several): a second kai-ray, or a test run beside a simulation, would share the first one's
    # instance and lose its actors when the first one ends and shuts it down. "local" always
    # starts one of our own; joining is what RAY_ADDRESS (or ``address``) is for.
    ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)


# Each shard actor asks Ray for a sliver of a CPU. Not to reserve one (a shard works only while the
# coordinator waits for it), but for what asking for any resource does: Ray sends the creation of
# such an actor to its owner's node, whose one SPREAD cursor walks every node in turn, where an
# actor that asks for nothing is handed to a random node's cursor and two shards can land on one
# node (2 pairs of 5 did, on three nodes); and a node that offers actors no CPU (`ray start
# --num-cpus 0`, as the chart's KubeRay head) hosts no shard.
SHARD_ACTOR_CPUS = 0.01
# The label Ray gives every node (Ray 2.49 and newer), its node id.
NODE_ID_LABEL = "ray.io/node-id"
# For this long new shard actors stay off a node where one was lost. Ray finds a node dead only
# once it has missed its health checks (about 15 s with Ray's defaults for a node whose processes
# died, measured); until then SPREAD still counts it alive, and an actor placed there waits for that
# verdict and dies with it (6 and 12 s measured, the cycle blocked meanwhile). A node that went
# silent is known lost here once a round's timeout has passed (``round_timeout.answer_timeout``, at least 10 s by
# default), and to Ray only a minute after it went (62-63 s measured): this outlasts the 50 s or
# so between. After this long the node is either known dead, and Ray skips it, or was fine all
# along (the actor died for another reason) and takes shards again.
LOST_NODE_AVOIDANCE_SECONDS = 60.0


class ShardActor(Shard):
    """A shard in an actor process of its own (Ray titles it ``ray::ShardActor``), which it keeps
    for its lifetime: its garbage collector is tuned as the coordinator's is
    (``kai_ray.app.runtime.GC_THRESHOLDS``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from kai_ray.app.runtime import tune_gc_for_large_models

        tune_gc_for_large_models()
        super().__init__(*args, **kwargs)
        self._heap = HeapTrimmer()

    def handle_packed(self, batch: bytes) -> bytes:
        """``handle``, its batch and answer packed (``kai_ray.app.wire``)."""
        answer = pack(self.handle(unpack(batch)))
        self._heap.maybe()
        return answer

    def ray_node_id(self) -> str:
        """The Ray node this actor runs on."""
        import ray

        return str(ray.get_runtime_context().get_node_id())


class RayTransport:
    """Shard actors, spread over the Ray cluster's nodes; ``exchange`` submits every batch before
    waiting for any answer."""

    remote = True

    def __init__(
        self,
        count: int,
        policy: PlacementPolicy,
        ttl: float = 30.0,
        round_timeout: float | None = DEFAULT_SHARD_ROUND_TIMEOUT,
    ) -> None:
        import ray

        self._actor = ray.remote(num_cpus=SHARD_ACTOR_CPUS)(ShardActor)
        self._policy = policy
        self._ttl = ttl
        self.round_timeout = round_timeout  # None: wait for an answer as long as Ray does
        # This process's node is alive while it runs: never avoided, so a new shard always has a place.
        self._home = ray.get_runtime_context().get_node_id()
        self._lost_on: dict[str, float] = {}  # Ray node -> when a shard actor on it stopped answering
        self._node_answers: dict[int, Any] = {}  # shard -> its actor's answer to ray_node_id, asked first
        self.handles: dict[int, Any] = {}
        for shard_id in range(count):  # a placement looks at the shards already in self.handles
            self.handles[shard_id] = self._new(shard_id)

    def _new(self, shard_id: int) -> Any:
        placement = self._placement(shard_id)
        handle: Any = self._actor.options(**placement).remote(shard_id, self._policy, self._ttl)
        # Asked before any batch and kept by this process: where the actor ran is still known once
        # it is gone, which is when it matters.
        self._node_answers[shard_id] = handle.ray_node_id.remote()
        return handle

    def _placement(self, shard_id: int) -> dict[str, Any]:
        """SPREAD over the nodes Ray counts alive, less those where a shard actor was lost lately,
        and among them a node that hosts none of the other shards, if Ray has one. SPREAD alone
        walks the nodes in turn whatever they host: a replacement made after a loss can join the
        shard on one survivor while another survivor hosts none, and two shards on one node share
        its CPUs and its fate."""
        now = time.monotonic()
        self._lost_on = {node: at for node, at in self._lost_on.items() if now - at < LOST_NODE_AVOIDANCE_SECONDS}
        lost = sorted(self._lost_on)
        taken = sorted(self._shard_nodes(other_than=shard_id) - self._lost_on.keys())
        options: dict[str, Any] = {"scheduling_strategy": "SPREAD"}
        if lost:
            options["label_selector"] = _not_on(lost)
        if taken:
            # Ray tries the label selector first and the fallback's only if no node satisfies it.
            options["fallback_strategy"] = [{"label_selector": options.get("label_selector", {})}]
            options["label_selector"] = _not_on(lost + taken)
        return options

    def _shard_nodes(self, other_than: int) -> set[str]:
        """The nodes of the other shard actors that have said where they run (one still starting
        has not; waiting for it would make shards start one at a time)."""
        import ray
        from ray.exceptions import RayError

        answers = [answer for sid, answer in self._node_answers.items() if sid in self.handles and sid != other_than]
        if not answers:
            return set()
        ready, _ = ray.wait(answers, num_returns=len(answers), timeout=0)
        nodes: set[str] = set()
        for answer in ready:
            with contextlib.suppress(RayError):  # that actor died before it answered
                nodes.add(str(ray.get(answer)))
        return nodes

    def _lost(self, shard_id: int) -> None:
        """The shard's actor stopped answering: if its node is gone too, Ray may not know it yet."""
        import ray
        from ray.exceptions import RayError

        answer = self._node_answers.get(shard_id)
        if answer is None or not ray.wait([answer], timeout=0)[0]:
            return  # it was lost before it said where it ran
        try:
            node = str(ray.get(answer))
        except RayError:
            return
        if node != self._home:
            self._lost_on[node] = time.monotonic()

    def ray_nodes(self) -> dict[int, str]:
        """The Ray node id each shard actor runs on (waiting for actors still starting)."""
        import ray

        ids = self.shard_ids()
        return dict(zip(ids, map(str, ray.get([self._node_answers[sid] for sid in ids])), strict=True))

    def shard_ids(self) -> list[int]:
        return sorted(self.handles)

    def wait_ready(self) -> None:
        """Block until every shard actor has started (actors start lazily), however long that takes:
        no cycle waits yet, and a round's timeout would take an actor slow to start for a lost one."""
        self.ray_nodes()

    def exchange(self, batches: Mapping[int, Batch]) -> dict[int, BatchReply | ShardDown]:
        """Every batch submitted, then every answer awaited until its deadline (``answer_timeout``).
        An actor that has not answered by then is taken for lost, as one whose process died: a
        node that went silent closes no connection, and Ray would find it dead only after its
        health checks, about a minute, with the cycle blocked meanwhile; an actor that cannot be
        placed anywhere would block it for good."""
        import ray
        from ray.exceptions import RayActorError, RayError

        timeout = self.round_timeout
        allowed = {sid: answer_timeout(timeout, batch, self._starting(sid)) for sid, batch in batches.items()}
        refs = {sid: self.handles[sid].handle_packed.remote(pack(batch)) for sid, batch in batches.items()}
        late = _unanswered_by_deadline(refs, allowed)
        out: dict[int, BatchReply | ShardDown] = {}
        for sid, ref in refs.items():
            if sid in late:
                self._lost(sid)
                # Killed now: should it wake up, it must not go on beside its replacement.
                ray.kill(self.handles[sid], no_restart=True)
                out[sid] = ShardDown(sid, f"no answer in {allowed[sid]:g} s")
                continue
            try:
                out[sid] = unpack(ray.get(ref))
            except RayActorError as error:  # the actor's process is gone, or unreachable
                self._lost(sid)
                out[sid] = ShardDown(sid, type(error).__name__)
            except RayError as error:  # the batch raised inside the actor: its state is suspect
                out[sid] = ShardDown(sid, f"{type(error).__name__}: {str(error).splitlines()[0]}")
        return out

    def _starting(self, shard_id: int) -> bool:
        """The shard's actor has not answered yet: its process may still be starting."""
        import ray

        answer = self._node_answers.get(shard_id)
        return answer is None or not ray.wait([answer], timeout=0)[0]

    def replace(self, shard_id: int) -> None:
        import ray

        old = self.handles.get(shard_id)
        if old is not None:
            ray.kill(old, no_restart=True)  # a shard that failed a batch may still be alive
        self.handles[shard_id] = self._new(shard_id)

    def add(self, shard_id: int) -> None:
        self.handles[shard_id] = self._new(shard_id)

    def remove(self, shard_id: int) -> None:
        import ray

        ray.kill(self.handles.pop(shard_id))
        self._node_answers.pop(shard_id, None)


def _unanswered_by_deadline(refs: Mapping[int, Any], allowed: Mapping[int, float | None]) -> set[int]:
    """Wait for every answer in ``refs`` (shard -> Ray object ref) until each one's deadline,
    ``allowed[shard]`` seconds from now (None: none); the shards that had not answered by theirs.
    An actor that died counts as answered: getting its answer raises."""
    import ray

    started = time.monotonic()
    deadlines = {sid: math.inf if (wait := allowed[sid]) is None else started + wait for sid in refs}
    waiting = dict(refs)
    late: set[int] = set()
    while waiting:
        now = time.monotonic()
        for sid in [sid for sid in waiting if deadlines[sid] <= now]:
            late.add(sid)
            del waiting[sid]
        if not waiting:
            break
        soonest = min(deadlines[sid] for sid in waiting)
        ready, _ = ray.wait(
            list(waiting.values()), num_returns=len(waiting), timeout=None if soonest == math.inf else soonest - now
        )
        answered = set(ready)
        waiting = {sid: ref for sid, ref in waiting.items() if ref not in answered}
    return late


def _not_on(nodes: list[str]) -> dict[str, str]:
    """A label selector that matches every node but ``nodes``."""
    return {NODE_ID_LABEL: f"!in({','.join(nodes)})"}


@contextlib.contextmanager
def on_ray_actors(config: SchedulerConfig, shards: int) -> Iterator[Coordinator]:
    """A coordinator in this process whose shards are ``shards`` Ray actors, for as long as the
    block runs (Ray is started for it, and stopped after, unless it was running already)."""
    import ray

    started = not ray.is_initialized()
    ensure_ray()
    transport = RayTransport(shards, PlacementPolicy.of(config), round_timeout=config.shard_round_timeout)
    try:
        transport.wait_ready()
        yield Coordinator(config, ShardSet(transport))
    finally:
        for sid in transport.shard_ids():
            transport.remove(sid)
        if started:
            ray.shutdown()


class _CoordinatorHost(CoordinatorHost):
    """The coordinator actor: a ``CoordinatorHost`` whose coordinator's shards are actors (this
    actor owns them: they die with it)."""

    def __init__(self, config: SchedulerConfig, shards: int) -> None:
        from kai_ray.app.runtime import tune_gc_for_large_models

        tune_gc_for_large_models()  # this actor's process keeps the coordinator for its lifetime
        self._transport = RayTransport(shards, PlacementPolicy.of(config), round_timeout=config.shard_round_timeout)
        super().__init__(Coordinator(config, ShardSet(self._transport)))
        self._heap = HeapTrimmer()

    def ray_nodes(self) -> tuple[str, dict[int, str]]:
        """The Ray node this actor runs on, and each of its shard actors'."""
        import ray

        return str(ray.get_runtime_context().get_node_id()), self._transport.ray_nodes()

    def call_packed(self, method: str, args: bytes) -> bytes:
        """One of the host's methods, its arguments and answer packed (``kai_ray.app.wire``)."""
        answer = pack(getattr(self, method)(*unpack(args)))
        self._heap.maybe()
        return answer


class _RayHostLink:
    """A ``HostLink`` to a new coordinator actor."""

    def __init__(self, actor_class: Any, config: SchedulerConfig, shards: int) -> None:
        self._handle: Any = actor_class.remote(config, shards)

    def call(self, method: str, *args: Any) -> Any:
        import ray
        from ray.exceptions import RayActorError

        try:
            return unpack(ray.get(self._handle.call_packed.remote(method, pack(args))))
        except RayActorError as error:
            raise HostGone(type(error).__name__) from error

    def close(self) -> None:
        import ray

        ray.kill(self._handle)


class RemoteCoordinator(ReplaceableCoordinator):
    """The coordinator as a Ray actor, with its shards as actors too; a new actor replaces one that
    died (``coordinator.replaceable``)."""

    def __init__(self, config: SchedulerConfig, shards: int) -> None:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ensure_ray()
        # Every cycle's changes and results travel between this process and the coordinator: it
        # runs on this process's node (under Ray Client, the head), a replacement too, and nowhere
        # else: were the node gone, so would this process be.
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        actor_class: Any = ray.remote(num_cpus=0)(_CoordinatorHost).options(scheduling_strategy=here)
        super().__init__(lambda count: _RayHostLink(actor_class, config, count), shards)

    def ray_nodes(self) -> tuple[str, dict[int, str]]:
        """The Ray node the coordinator actor runs on, and each shard actor's."""
        nodes: tuple[str, dict[int, str]] = self._call("ray_nodes")
        return nodes
