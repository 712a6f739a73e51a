"""Telling users why a job waits: PodGroup conditions and deduplicated Events.

A pending pod group gets KAI's ``UnschedulableOnNodePool`` scheduling condition with the
reason in words, and one Warning event; both change only when the reason changes (no
event floods, volcano#1094). When the group runs, the condition is removed and a Normal
event says so (KAI#1888: a stale Unschedulable condition that never clears).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping

from k8s_adapter.api import KubeApi, KubeError
from k8s_adapter.kinds import EVENTS, POD_GROUPS

log = logging.getLogger(__name__)
CONDITION = "UnschedulableOnNodePool"
MAX_MESSAGE = 1000


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


KAI_REASONS = ("OverLimit", "NonPreemptibleOverQuota", "QueueDoesNotExist", "PreemptionDelayNotElapsed")


def _reason_code(reason: str) -> str:
    """KAI's reason codes where the message starts with one, else its generic PodSchedulingErrors."""
    head = reason.split(":", 1)[0]
    return head if head in KAI_REASONS else "PodSchedulingErrors"


class StatusWriter:
    def __init__(
        self,
        api: KubeApi,
        reporter: str = "kai-ray",
        node_pool: str = "default",
        concurrency: int = 16,
        report_after: float = 2.0,
    ) -> None:
        self.api = api
        self.reporter = reporter
        self.node_pool = node_pool
        self.limit = asyncio.Semaphore(concurrency)
        self.last: dict[str, str] = {}  # pod group -> last reason written ("" once running)
        self.writes = 0
        self.report_after = report_after  # a group pending for less than this is not reported yet
        self._pending_since: dict[str, float] = {}

    async def publish(self, groups: Mapping[str, tuple[str, str]]) -> None:
        """``groups``: pod group key -> (status, reason) from a cycle's decisions."""
        tasks = []
        now = time.monotonic()
        for key in [k for k in self._pending_since if groups.get(k, ("", ""))[0] != "Pending"]:
            del self._pending_since[key]
        for key, (status, reason) in groups.items():
            wanted = reason if status == "Pending" else ""
            if wanted and now - self._pending_since.setdefault(key, now) < self.report_after:
                continue  # most pods wait one or two cycles; only report what keeps waiting
            if self.last.get(key, "") == wanted and (wanted or key in self.last):
                continue
            if not wanted and key not in self.last:
                continue  # never reported unschedulable: nothing to clear
            tasks.append(self._write(key, wanted))
        if tasks:
            await asyncio.gather(*tasks)

    async def _write(self, key: str, reason: str) -> None:
        namespace, name = key.split("/", 1)
        async with self.limit:
            try:
                await self._patch_condition(namespace, name, reason)
                await self._event(namespace, name, reason)
            except KubeError as exc:
                if exc.status != 404:  # implicit groups not created yet have no object to annotate
                    log.info("status of %s not written: %s", key, exc)
                return
        self.writes += 1
        if reason:
            self.last[key] = reason
        else:
            self.last.pop(key, None)

    async def _patch_condition(self, namespace: str, name: str, reason: str) -> None:
        conditions = (
            []
            if not reason
            else [
                {
                    "type": CONDITION,
                    "nodePool": self.node_pool,
                    "status": "True",
                    "lastTransitionTime": _now(),
                    "transitionID": str(uuid.uuid4())[:8],
                    "reasons": [{"reason": _reason_code(reason), "message": reason[:MAX_MESSAGE]}],
                }
            ]
        )
        await self.api.request(
            "PATCH",
            POD_GROUPS.item(name, namespace, "status"),
            body={"status": {"schedulingConditions": conditions}},
            content_type="application/merge-patch+json",
        )

    async def _event(self, namespace: str, name: str, reason: str) -> None:
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{name}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": "scheduling.run.ai/v2alpha2",
                "kind": "PodGroup",
                "name": name,
                "namespace": namespace,
            },
            "reason": "Unschedulable" if reason else "Scheduled",
            "message": (reason or "the pod group is scheduled")[:MAX_MESSAGE],
            "type": "Warning" if reason else "Normal",
            "source": {"component": self.reporter},
            "reportingComponent": self.reporter,
            "firstTimestamp": _now(),
            "lastTimestamp": _now(),
            "count": 1,
        }
        await self.api.request("POST", EVENTS.collection(namespace), body=event)
