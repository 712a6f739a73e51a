"""The live loop's reclaim storm on the dev cluster ends where a user expects: the queue owed half
the cluster holds half of it, and no more pods were evicted than that took."""

from __future__ import annotations

import asyncio

from loadtests.devcluster_storm import run


def test_the_live_loop_gives_the_starved_queue_its_half_evicting_exactly_that() -> None:
    report = asyncio.run(run(nodes=10, period=0.2, timeout=120))
    assert report.seconds_to_share is not None, report.text()
    assert report.evictions == report.gpus // 2, report.text()
    assert report.sessions, "the storm was decided in sessions the run recorded"
