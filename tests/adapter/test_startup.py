"""The start against the dev cluster: the first binds leave while the first cycle still concludes its
jobs, and the pods are read page by page as their list comes."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from coordinator.binding import BindCommit
from coordinator.results import CycleResult
from k8s_adapter.cache import ClusterCache
from k8s_adapter.kinds import PODS
from tests.adapter.conftest import dev_env, pod, pod_group, queue, running, until

GANGS, SIZE = 12, 4


async def test_the_first_binds_leave_before_the_first_cycle_has_concluded_every_gang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = threading.Event()
    concluded: list[tuple[bool, int, int]] = []  # (first request sent meanwhile, binds concluded, gangs concluded)
    hand_out = BindCommit.hand_out

    def hand_out_and_wait(self: BindCommit, result: CycleResult) -> None:
        first = result.streamed == 0
        hand_out(self, result)
        if first and result.streamed and not concluded:
            # The cycle waits here, on its thread, with the rest of its jobs still to conclude: the
            # first bind request can only leave now if the loop sends what was handed out at once.
            concluded.append((sent.wait(10), len(result.binds), len({b.reservation for b in result.binds})))

    monkeypatch.setattr(BindCommit, "hand_out", hand_out_and_wait)
    async with dev_env(tmp_path, 4) as env:
        await env.create("/apis/scheduling.run.ai/v2/queues", queue("q"))
        names = []
        for g in range(GANGS):
            await env.create(
                "/apis/scheduling.run.ai/v2alpha2/namespaces/default/podgroups", pod_group(f"g{g}", "q", SIZE)
            )
            for i in range(SIZE):
                names.append(f"g{g}-{i}")
                await env.create("/api/v1/namespaces/default/pods", pod(names[-1], gpus=0, group=f"g{g}"))
        loop = env.loop()
        marked = loop.binder.mark

        def mark(step: str) -> None:
            if step == "sent":
                sent.set()
            marked(step)

        loop.binder.mark = mark

        def bound() -> bool:
            items = env.cluster.objects("", "v1", "pods", "default")
            return sum(1 for p in items if (p.get("spec") or {}).get("nodeName")) == len(names)

        async with running(loop):
            await until(bound, timeout=20)
        [(sent_meanwhile, binds, gangs)] = concluded
        assert sent_meanwhile  # the first pods/binding left while the cycle was still concluding
        assert binds < GANGS * SIZE and binds % SIZE == 0 and gangs == binds // SIZE  # whole gangs only
        assert loop.state.binds == GANGS * SIZE  # every pod bound once, none twice
        assert set(loop.startup.marks) >= {"loop", "nodes", "tables", "listed", "decoded", "sent", "cycled", "bound"}


def _pod(name: str, version: int) -> dict[str, Any]:
    made = pod(name, gpus=0, queue_name="q")
    made["metadata"].update(uid=f"uid-{name}", resourceVersion=str(version), namespace="default")
    return made


def test_a_list_is_read_page_by_page_and_its_end_reads_nothing_twice() -> None:
    cache = ClusterCache()
    cache.on_page(PODS, [_pod("a", 1), _pod("b", 2)])
    first = cache.take_deltas()
    assert sorted(p.name for p in first.pods_upserted) == ["a", "b"]  # read before the list ended
    cache.on_page(PODS, [_pod("c", 3)])
    cache.on_list(PODS, [_pod("a", 1), _pod("c", 3), _pod("d", 4)])  # b went while the list came
    last = cache.take_deltas()
    assert sorted(p.name for p in last.pods_upserted) == ["c", "d"]  # a, already read, not again
    assert last.pods_removed == ("default/b",)
    assert sorted(cache.pods) == ["default/a", "default/c", "default/d"]
    cache.on_list(PODS, [_pod("a", 1), _pod("c", 3), _pod("d", 4)])  # a later relist reads it whole again
    assert len(cache.take_deltas().pods_upserted) == 3
