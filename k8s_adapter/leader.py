"""Leader election on a coordination.k8s.io Lease (kubernetes-asyncio's LeaseLock).

Every replica keeps its watches warm; only the leader schedules, binds and evicts. The
leader re-checks that it still leads right before each batch of binds (fencing): a Ray
actor or a slow cycle does not notice the election task being cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid
from typing import Any

from k8s_adapter.api import KubeApi, KubeError

log = logging.getLogger(__name__)


class Leadership:
    """Whether this replica leads right now; always True when election is off."""

    def __init__(self, enabled: bool, lease_duration: int = 10) -> None:
        self.enabled = enabled
        self.lease_duration = int(lease_duration)  # whole seconds: the Lease stores an integer
        self.leading = not enabled
        self.since = time.monotonic() if not enabled else 0.0
        self.identity = f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"
        self._last_renew = time.monotonic()

    def is_leader(self) -> bool:
        if not self.enabled:
            return True
        # Fencing: a lease not renewed within its duration may already belong to someone else.
        return self.leading and time.monotonic() - self._last_renew < self.lease_duration

    def renewed(self) -> None:
        self._last_renew = time.monotonic()

    async def campaign(
        self, api_client: Any, name: str, namespace: str, renew_deadline: float | None = None, retry_period: float = 2.0
    ) -> None:
        """Take part in the election forever; ``leading`` follows the outcome. The renew deadline
        defaults to 70% of the lease, as kube-scheduler's 10 s of 15 s."""
        if renew_deadline is None:
            renew_deadline = 0.7 * self.lease_duration
        if not self.enabled:
            return
        from kubernetes_asyncio.leaderelection import electionconfig, leaderelection

        LeaseLock = _quiet_lease_lock()

        class TrackedElection(leaderelection.LeaderElection):
            """Records every successful acquire or renew, for fencing."""

            async def try_acquire_or_renew(inner) -> bool:  # noqa: N805 - nested class, outer self is used
                ok = bool(await super().try_acquire_or_renew())
                if ok:  # True only when this replica acquired or renewed the lease
                    self.renewed()
                return ok

        async def lead() -> None:
            self.leading = True
            self.since = time.monotonic()
            log.info("%s is now the leader", self.identity)
            try:
                await asyncio.Event().wait()  # until the election cancels us
            finally:
                self.leading = False

        async def stop() -> None:
            self.leading = False
            log.warning("%s lost the lease", self.identity)

        # Invalid timings fail here, loudly, instead of silently ending the election task.
        electionconfig.Config(
            LeaseLock(name, namespace, self.identity, api_client),
            self.lease_duration,
            renew_deadline,
            retry_period,
            lead,
            stop,
        )
        while True:
            lock = LeaseLock(name, namespace, self.identity, api_client)
            config = electionconfig.Config(
                lock,
                lease_duration=self.lease_duration,
                renew_deadline=renew_deadline,
                retry_period=retry_period,
                onstarted_leading=lead,
                onstopped_leading=stop,
            )
            try:
                await TrackedElection(config).run()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the election must keep trying whatever the API does
                log.warning("leader election failed (%s: %s); retrying", type(exc).__name__, exc)
            self.leading = False
            await asyncio.sleep(retry_period)

    async def release(self, api: KubeApi, name: str, namespace: str) -> bool:
        """On a clean shutdown, give the lease up so a standby takes over at its next retry instead
        of waiting for the lease to run out (client-go's ReleaseOnCancel). Best effort: the lease
        is only cleared if this replica still holds it, and a failure just leaves it to expire."""
        if not self.enabled:
            return False
        path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        try:
            lease = (await api.request("GET", path)).body
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return False
            # An update (not a patch: the role grants leases get/create/update) carrying the version
            # read, so a lease someone else took meanwhile is left alone (409).
            spec = {k: v for k, v in lease["spec"].items() if k != "holderIdentity"}
            await api.request("PUT", path, body={**lease, "spec": spec}, timeout=5.0)
        except KubeError as exc:
            log.warning("could not release the lease %s/%s: %s", namespace, name, exc)
            return False
        finally:
            self.leading = False
        log.info("%s released the lease", self.identity)
        return True


def _quiet_lease_lock() -> type[Any]:
    """kubernetes-asyncio's LeaseLock, logging a lost race for the lease in one line.

    Two replicas that try to take or renew the lease at once are normal: the API server answers
    one of them 409 Conflict. The library logs that with a full traceback; here a conflict is a
    debug line (another replica holds the lease) and any other refusal one warning line.
    """
    from kubernetes_asyncio.client.exceptions import ApiException
    from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

    class QuietLeaseLock(LeaseLock):
        async def create(self, name: str, namespace: str, election_record: Any) -> bool:
            try:
                await self.api_instance.create_namespaced_lease(namespace, self._lease(election_record))
                return True
            except ApiException as exc:
                _lost_race("create", namespace, name, exc)
                return False

        async def update(self, name: str, namespace: str, updated_record: Any) -> bool:
            try:
                assert self.lease_reference is not None
                self.lease_reference.spec = self.update_lease(updated_record, self.lease_reference.spec)
                await self.api_instance.replace_namespaced_lease(
                    name=name, namespace=namespace, body=self.lease_reference
                )
                return True
            except ApiException as exc:
                _lost_race("renew", namespace, name, exc)
                return False

        def _lease(self, record: Any) -> Any:
            from kubernetes_asyncio import client

            return client.V1Lease(metadata=client.V1ObjectMeta(name=self.name), spec=self.update_lease(record))

    return QuietLeaseLock


def _lost_race(verb: str, namespace: str, name: str, exc: Any) -> None:
    if exc.status == 409:
        log.debug("lease %s/%s: could not %s it, another replica holds it (409 Conflict)", namespace, name, verb)
    else:
        log.warning("lease %s/%s: could not %s it: %s %s", namespace, name, verb, exc.status, exc.reason)
