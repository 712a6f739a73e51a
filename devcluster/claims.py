"""Kubernetes' resource-claim controller, for the dev cluster's ``resource.k8s.io/v1`` objects.

- A pod that names a ResourceClaimTemplate gets its own ResourceClaim made from it
  (``<pod>-<claim>-<5 characters>``, owned by the pod), and the name is recorded in the pod's
  ``status.resourceClaimStatuses``: only then can a scheduler place the pod.
- When a pod has finished or is gone, it is taken out of ``reservedFor`` of the claims it
  used; a claim nobody is reserved for any more loses its allocation, so its devices are free
  again; a claim made from a template for a pod that is gone is deleted.

Work is queued by store changes and done by ``sync`` (the node simulator's loop calls it), so
writes never happen inside a store notification.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from devcluster.catalog import ResourceType
from devcluster.registry import Registry
from devcluster.store import Change

log = logging.getLogger(__name__)
Obj = dict[str, Any]
DONE = ("Succeeded", "Failed")


class ClaimController:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.pods = registry.catalog.require("", "v1", "pods")
        self.claims = registry.catalog.require("resource.k8s.io", "v1", "resourceclaims")
        self.templates = registry.catalog.require("resource.k8s.io", "v1", "resourceclaimtemplates")
        self._work: dict[tuple[str, str], Obj] = {}  # (namespace, pod) -> its latest state (DELETED: last one)
        self._gone: set[tuple[str, str]] = set()

    def on_change(self, rt: ResourceType, change: Change) -> bool:
        """Note a pod that needs claims made or released; True when there is work."""
        if rt.storage_key != self.pods.storage_key or not (change.obj.get("spec") or {}).get("resourceClaims"):
            return False
        meta = change.obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        self._work[key] = change.obj
        if change.type == "DELETED":
            self._gone.add(key)
        return True

    def sync(self) -> int:
        work, gone = self._work, self._gone
        self._work, self._gone = {}, set()
        done = 0
        for key, pod in work.items():
            try:
                if key in gone:
                    done += self._release(pod, deleted=True)
                elif (pod.get("status") or {}).get("phase") in DONE:
                    done += self._release(pod, deleted=False)
                else:
                    done += self._make_claims(pod)
            except Exception:  # one odd pod must not stop the controller
                log.exception("claim controller: pod %s/%s", *key)
        return done

    def _make_claims(self, pod: Obj) -> int:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        namespace = meta.get("namespace", "")
        statuses = {s.get("name"): s for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        made = []
        for entry in spec.get("resourceClaims") or []:
            template_name = entry.get("resourceClaimTemplateName")
            if not template_name or entry.get("name") in statuses:
                continue
            template = self.registry.store.get(self.templates, namespace, template_name)
            if template is None:
                continue  # as upstream: the pod waits until the template exists
            suffix = hashlib.sha256(f"{meta['uid']}/{entry['name']}".encode()).hexdigest()[:5]
            name = f"{meta['name']}-{entry['name']}-{suffix}"
            if self.registry.store.get(self.claims, namespace, name) is None:
                owner = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
                body = {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaim",
                    "metadata": {
                        "name": name,
                        "namespace": namespace,
                        "ownerReferences": [owner],
                        "annotations": {"resource.kubernetes.io/pod-claim-name": entry["name"]},
                    },
                    "spec": dict((template.get("spec") or {}).get("spec") or {}),
                }
                self.registry.create(self.claims, namespace, body)
            made.append({"name": entry["name"], "resourceClaimName": name})
        if not made:
            return 0
        current = self.registry.store.get(self.pods, namespace, meta["name"])
        if current is None or current["metadata"]["uid"] != meta["uid"]:
            return 0
        status = dict(current.get("status") or {})
        status["resourceClaimStatuses"] = [*(status.get("resourceClaimStatuses") or []), *made]
        self.registry.store.replace(self.pods, {**current, "status": status})
        return len(made)

    def _release(self, pod: Obj, deleted: bool) -> int:
        meta = pod["metadata"]
        namespace, uid = meta.get("namespace", ""), meta["uid"]
        changed = 0
        for claim in list(self.registry.store.table(self.claims).objects.get(namespace, {}).values()):
            status = claim.get("status") or {}
            reserved = status.get("reservedFor") or []
            kept = [
                r for r in reserved if not (r.get("uid") == uid or (not r.get("uid") and r.get("name") == meta["name"]))
            ]
            owned = any(o.get("uid") == uid for o in claim["metadata"].get("ownerReferences") or [])
            if deleted and owned:
                self.registry.store.remove(self.claims, namespace, claim["metadata"]["name"])
                changed += 1
                continue
            if len(kept) == len(reserved):
                continue
            status = {**status, "reservedFor": kept}
            if not kept:
                status.pop("allocation", None)
            self.registry.store.replace(self.claims, {**claim, "status": status})
            changed += 1
        return changed
