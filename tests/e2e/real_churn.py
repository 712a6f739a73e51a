"""The incremental-vs-from-scratch churn of tests/live, against the real control plane.

The same checks as ``tests.live.churn`` (the running scheduler's view against a fresh
``kai-ray schedule --snapshot`` of the same objects at every quiet point, no over-commit, no
partial gang, no pod bound twice), but the objects live in etcd behind a real kube-apiserver,
kube-controller-manager runs its controllers (pod GC, node lifecycle) and kwok plays the
kubelets in real time: bound pods start, pods with ``kai-ray.dev/run-seconds`` finish, deleted
pods go. Every change goes through the API as a client would send it.

What the dev cluster's churn does and this one does not: fractions (kwok does not run KAI's
reservation pods, so they would never report a GPU), NotReady flips (kwok's heartbeats set
Ready back) and injected faults (a real apiserver cannot be told to fail one request).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import random
import time
from pathlib import Path

from k8s_adapter.api import KubeError
from kai_ray.app.sim.cluster import synthetic_nodes
from tests.e2e.backends import NODE_COUNT, Backend
from tests.live import ops
from tests.live.churn import (
    CHURN_CONFIG,
    Findings,
    Recorder,
    caught_up,
    churn_loop,
    drive,
    still_moving,
    write_config,
)
from tests.live.views import KINDS, Obj, compare

NS = ops.NS
PODS = f"/api/v1/namespaces/{NS}/pods"
GROUPS = f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NS}/podgroups"
QUEUES = "/apis/scheduling.run.ai/v2/queues"
NODES = "/api/v1/nodes"
CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
WEIGHTS = {"job": 30, "tick": 20, "delete_pod": 8, "delete_job": 4, "cordon": 4, "node": 6, "queue": 4, "foreign": 2}
LONGEST_RUN = 4.0  # seconds a self-ending pod runs at most: kwok keeps real time


class RealChurn:
    def __init__(self, backend: Backend, seed: int, workdir: Path) -> None:
        self.backend = backend
        self.api = backend.api
        self.rng = random.Random(seed)
        self.workdir = workdir
        self.findings = Findings(seed)
        self.config, self.config_path = CHURN_CONFIG, write_config(workdir)
        pool = synthetic_nodes(NODE_COUNT + 2)
        self.home = pool[:NODE_COUNT]  # the cluster's own nodes, as they must be left
        self.spare = pool[NODE_COUNT:]
        self.manifests = {n["metadata"]["name"]: n for n in pool}  # as each node registers
        self.deleted: list[Obj] = []
        self.added: set[str] = set()
        self.classes: list[str] = []
        self.jobs = 0
        self.recorder: Recorder | None = None
        self.loop = churn_loop(self.api, self.findings, self._recorded, period=0.05)

    def _recorded(self, recorder: Recorder) -> None:
        self.recorder = recorder

    # ------------------------------------------------------------------ setup and teardown
    async def setup(self) -> None:
        for name, value in ops.CLASSES:
            body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}}
            if await self._create(CLASSES, {**body, "value": value}):
                self.classes.append(name)
        for shape in ops.QUEUE_SHAPES.values():
            await self._create(QUEUES, copy.deepcopy(shape))

    async def restore(self) -> None:
        """Leave the cluster's nodes as they were (the next test's ``empty`` clears the rest)."""
        for node in self.home:
            name = node["metadata"]["name"]
            if not await self._exists(f"{NODES}/{name}"):
                await self._create(NODES, copy.deepcopy(node))
            await self._patch(f"{NODES}/{name}", {"spec": {"unschedulable": None}})
        for name in self.added:
            await self._delete(f"{NODES}/{name}")
        for name in self.classes:
            await self._delete(f"{CLASSES}/{name}")

    # ------------------------------------------------------------------ API helpers
    async def _create(self, path: str, obj: Obj) -> bool:
        """Create ``obj``; False when it exists already (any other refusal is the test's mistake)."""
        try:
            await self.api.request("POST", path, body=obj)
        except KubeError as error:
            if error.status != 409:
                raise
            return False
        return True

    async def _patch(self, path: str, body: Obj) -> None:
        with contextlib.suppress(KubeError):  # gone meanwhile (kwok finished it, pod GC took it)
            await self.api.request("PATCH", path, body=body, content_type="application/merge-patch+json")

    async def _delete(self, path: str) -> None:
        with contextlib.suppress(KubeError):
            await self.api.request("DELETE", path)

    async def _exists(self, path: str) -> bool:
        try:
            await self.api.request("GET", path)
        except KubeError:
            return False
        return True

    async def _items(self, path: str) -> list[Obj]:
        return list((await self.api.request("GET", path)).body.get("items") or [])

    # ------------------------------------------------------------------ changes
    async def job(self) -> None:
        self.jobs += 1
        group, pods = ops.job_manifests(self.rng, f"j{self.jobs}", fractions=False, longest=LONGEST_RUN)
        if group is not None:
            await self._create(GROUPS, {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", **group})
        for pod in pods:
            await self._create(PODS, pod)

    async def tick(self) -> None:
        await asyncio.sleep(self.rng.uniform(0.2, 1.0))  # kwok moves pods on in real time

    async def delete_pod(self) -> None:
        pods = await self._items(PODS)
        if pods:
            await self._delete(f"{PODS}/{self.rng.choice(pods)['metadata']['name']}")

    async def delete_job(self) -> None:
        groups = await self._items(GROUPS)
        if not groups:
            return
        name = self.rng.choice(groups)["metadata"]["name"]
        await self._delete(f"{GROUPS}/{name}")
        for pod in await self._items(PODS):
            if (pod["metadata"].get("annotations") or {}).get("pod-group-name") == name and self.rng.random() < 0.8:
                await self._delete(f"{PODS}/{pod['metadata']['name']}")

    async def cordon(self) -> None:
        nodes = await self._items(NODES)
        if nodes:
            node = self.rng.choice(nodes)
            flag = not (node.get("spec") or {}).get("unschedulable", False)
            await self._patch(f"{NODES}/{node['metadata']['name']}", {"spec": {"unschedulable": flag or None}})

    async def node(self) -> None:
        """A busy node deleted with its pods bound to it, or one that registers (again)."""
        nodes = await self._items(NODES)
        if self.rng.random() < 0.5 and len(nodes) > 2:
            busy = {p["spec"].get("nodeName") for p in await self._items(PODS)}
            node = self.rng.choice([n for n in nodes if n["metadata"]["name"] in busy] or nodes)
            name = node["metadata"]["name"]
            self.deleted.append(self.manifests[name])
            await self._delete(f"{NODES}/{name}")
        elif self.deleted and (self.rng.random() < 0.7 or not self.spare):
            await self._create(NODES, copy.deepcopy(self.deleted.pop()))
        elif self.spare:
            node = self.spare.pop(self.rng.randrange(len(self.spare)))
            if await self._create(NODES, copy.deepcopy(node)):
                self.added.add(node["metadata"]["name"])

    async def queue(self) -> None:
        existing = {q["metadata"]["name"] for q in await self._items(QUEUES)}
        what, name, gpu = ops.queue_op(self.rng, existing)
        if what == "create":
            await self._create(QUEUES, copy.deepcopy(ops.QUEUE_SHAPES[name]))
        elif what == "delete":
            await self._delete(f"{QUEUES}/{name}")
        else:
            await self._patch(f"{QUEUES}/{name}", {"spec": {"resources": {"gpu": gpu}}})

    async def foreign(self) -> None:
        nodes = await self._items(NODES)
        if nodes:
            self.jobs += 1
            pod = ops.foreign_pod(self.rng, f"other-{self.jobs}", self.rng.choice(nodes)["metadata"]["name"])
            await self._create(PODS, pod)

    async def round(self, steps: int) -> None:
        for _ in range(steps):
            name = self.rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
            await getattr(self, name)()
            self.findings.ops += 1

    # ------------------------------------------------------------------ quiet points
    async def objects(self) -> dict[str, list[Obj]]:
        out: dict[str, list[Obj]] = {}
        for group, version, plural, kind in KINDS:
            path = f"/apis/{group}/{version}/{plural}" if group else f"/api/{version}/{plural}"
            out[kind] = await self._items(path)
        return out

    async def quiet_point(self, timeout: float = 120.0) -> None:
        """Once nothing moves for a few cycles and the watches hold what the API lists, compare."""
        loop, recorder = self.loop, self.recorder
        assert recorder is not None
        deadline = time.monotonic() + timeout
        moving: list[str] = []
        while time.monotonic() < deadline:
            async with loop.steps.coordinator_lock:  # no cycle runs while quiet is judged and the view is read
                objects = await self.objects()
                moving = still_moving(loop, recorder, caught_up(loop, objects))
                if not moving:
                    assert recorder.last is not None
                    found = compare(
                        recorder.coordinator, recorder.last, objects, self.config, self.config_path, self.workdir
                    )
                    self.findings.quiet_point(found, objects)
                    return
            await asyncio.sleep(0.1)
        self.findings.problems.append(f"the scheduler never became quiet: {'; '.join(moving)}")


async def run_real_seed(backend: Backend, seed: int, workdir: Path, rounds: int, steps: int) -> Findings:
    churn = RealChurn(backend, seed, workdir)
    await churn.setup()
    try:
        await drive(churn, churn.loop, rounds, steps)
    finally:
        await churn.restore()
    return churn.findings
