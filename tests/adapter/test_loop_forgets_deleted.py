"""A long-running loop must not remember objects that are gone: whatever it keeps by a pod's or a
PodGroup's name or uid goes with the object, or the scheduler's process grows with every job it
ever scheduled."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from coordinator.replaceable import CoordinatorHost, ReplaceableCoordinator
from k8s_adapter.cache import ClusterCache
from k8s_adapter.leader import Leadership
from k8s_adapter.runner import CoordinatorLike, SchedulerLoop
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.app.wire import pack, unpack
from kai_ray.config import SchedulerConfig
from tests.adapter.conftest import Env, dev_env, pod, pod_group, queue, running, until

PODS = "/api/v1/namespaces/default/pods"
QUEUES = "/apis/scheduling.run.ai/v2/queues"
GROUPS = "/apis/scheduling.run.ai/v2alpha2/namespaces/default/podgroups"
OWN_PACKAGES = ("k8s_adapter", "coordinator", "pod_grouper", "kai_ray", "shards", "placement")


def remembered(root: object, marks: set[str]) -> Iterator[str]:
    """Paths (from ``root``) of the containers of kai-ray's objects whose keys or members name one
    of ``marks`` (pod names, uids): what a structure still holds of those objects."""
    seen: set[int] = set()
    todo: list[tuple[str, object]] = [("loop", root)]

    def names_one(item: object) -> bool:
        if isinstance(item, str):
            return any(mark in item for mark in marks)
        return isinstance(item, tuple) and any(names_one(part) for part in item)

    while todo:
        path, obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, dict):
            if any(names_one(key) for key in obj):
                yield path
            todo.extend((f"{path}[{key!r}]", value) for key, value in obj.items() if not isinstance(value, str))
        elif isinstance(obj, set | frozenset | list | tuple):
            if not isinstance(obj, tuple) and any(names_one(item) for item in obj):
                yield path  # a tuple naming one is a key or member of the container reported
            todo.extend((f"{path}[]", item) for item in obj if not isinstance(item, str))
        elif type(obj).__module__.startswith(OWN_PACKAGES):
            todo.extend((f"{path}.{name}", value) for name, value in _attributes(obj))


def _attributes(obj: object) -> Iterator[tuple[str, Any]]:
    yield from getattr(obj, "__dict__", {}).items()
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if hasattr(obj, name):
                yield name, getattr(obj, name)


class _PackedLink:
    """A coordinator host in this process, every call packed as to a Ray actor: the loop's side of
    a remote coordinator (what it keeps to rebuild a lost one, the results it holds) is the
    scheduler process's, as with ``kai-ray run --shards 2``."""

    def __init__(self, shards: int) -> None:
        self.host = CoordinatorHost(in_process_coordinator(CONFIG, shards))

    def call(self, method: str, *args: Any) -> Any:
        return unpack(pack(getattr(self.host, method)(*unpack(pack(args)))))

    def close(self) -> None:
        pass


CONFIG = SchedulerConfig.model_validate({"kValue": 0})
COORDINATORS: dict[str, Callable[[int], CoordinatorLike]] = {
    "in-process": lambda _nodes: in_process_coordinator(CONFIG),
    "replaceable": lambda _nodes: ReplaceableCoordinator(_PackedLink, 2),
}


async def _churn(env: Env, loop: SchedulerLoop, jobs: int) -> set[str]:
    """Jobs that come, get bound and go, half in PodGroups of their own and half bare pods (the
    pod grouper makes their groups); returns the names and uids they had."""
    marks: set[str] = set()
    for i in range(jobs):
        name = f"gone-{i:03d}"
        if i % 2:
            await env.create(GROUPS, pod_group(name, "q", 1))
            created = await env.create(PODS, pod(name, gpus=1, group=name, queue_name="q"))
        else:
            created = await env.create(PODS, pod(name, gpus=1, queue_name="q"))
        marks |= {name, created["metadata"]["uid"]}

    def all_bound() -> bool:
        items = env.cluster.objects("", "v1", "pods", "default")
        return sum(1 for p in items if (p.get("spec") or {}).get("nodeName")) == jobs

    await until(all_bound, timeout=30)
    for i in range(jobs):
        await env.api.request("DELETE", f"{PODS}/gone-{i:03d}")
    await until(lambda: not loop.cache.pods, timeout=30)
    for group in env.cluster.objects("scheduling.run.ai", "v2alpha2", "podgroups", "default"):
        marks.add(group["metadata"]["uid"])
        await env.api.request("DELETE", f"{GROUPS}/{group['metadata']['name']}")
    await until(lambda: not loop.cache.raw_groups and not loop.cache.pod_groups, timeout=30)
    return marks


@pytest.mark.parametrize("coordinator", sorted(COORDINATORS))
async def test_nothing_of_deleted_jobs_stays_in_the_loop(tmp_path: Any, coordinator: str) -> None:
    make = COORDINATORS[coordinator]
    async with dev_env(tmp_path, 4) as env:
        await env.create(QUEUES, queue("q"))
        loop = SchedulerLoop(env.api, ClusterCache(), make, env.registry, Leadership(enabled=False), period=0.05)
        async with running(loop):
            marks = await _churn(env, loop, 12)
            await asyncio.sleep(3 * loop.status.resources_every)  # the status writer's sweeps have run
            left = sorted(remembered(loop, marks))
    assert not left, "still remembered after their objects went:\n" + "\n".join(left)
