"""kai-ray's usage accounting kept on the Queues, so a restarted scheduler carries on.

Each queue's record (``coordinator.fairshare.UsageLedger.records``: its resource-seconds per
time bucket and the cluster's capacity-seconds) is written to the Queue's status subresource
under ``status.usageHistory``; nothing else of the status is touched (a JSON merge patch of
that one field). The chart's Queue CRD declares the field. A Queue CRD that does not (KAI's
own) makes the API server prune it: the store notices that the answer lacks the field, says
so once, and the history then lives only as long as the process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from k8s_adapter.api import KubeApi, KubeError
from k8s_adapter.kinds import QUEUES

log = logging.getLogger(__name__)
FIELD = "usageHistory"


class QueueUsageStore:
    def __init__(self, api: KubeApi, concurrency: int = 8) -> None:
        self.api = api
        self.limit = asyncio.Semaphore(concurrency)
        self.pruned = False  # the API server dropped the field: the CRD does not declare it
        self.writes = 0

    async def load(self) -> dict[str, Mapping[str, Any]]:
        """Every queue's kept record (queues without one are left out)."""
        answer = await self.api.request("GET", QUEUES.collection())
        records: dict[str, Mapping[str, Any]] = {}
        for item in answer.body.get("items") or []:
            name = (item.get("metadata") or {}).get("name")
            record = (item.get("status") or {}).get(FIELD)
            if name and isinstance(record, Mapping):
                records[str(name)] = record
        return records

    async def save(self, records: Mapping[str, Mapping[str, Any]]) -> int:
        """Write the records; returns how many queues took theirs."""
        if not records:
            return 0
        results = await asyncio.gather(*(self._save_one(name, record) for name, record in records.items()))
        return sum(results)

    async def _save_one(self, name: str, record: Mapping[str, Any]) -> bool:
        async with self.limit:
            try:
                answer = await self.api.request(
                    "PATCH",
                    QUEUES.item(name, None, "status"),
                    body={"status": {FIELD: dict(record)}},
                    content_type="application/merge-patch+json",
                )
            except KubeError as exc:
                if exc.status != 404:  # a queue deleted since the last cycle has nothing to keep
                    log.warning("usage history of queue %s not kept: %s", name, exc)
                return False
        self.writes += 1
        if FIELD not in (answer.body.get("status") or {}) and not self.pruned:
            self.pruned = True
            log.warning(
                "the API server dropped Queue status.%s: the installed Queue CRD does not declare it "
                "(install the CRDs of kai-ray's Helm chart); usage history will not survive a restart",
                FIELD,
            )
        return True
