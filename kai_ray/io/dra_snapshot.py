"""The DRA objects of a snapshot, and the claims Kubernetes would have made from templates.

A pod that names a ResourceClaimTemplate gets its own claim from Kubernetes' resource-claim
controller, recorded in ``pod.status.resourceClaimStatuses``. A snapshot taken before that
happened (or written by hand) has only the template: the claim is made here the same way,
named ``<pod>-<claim>`` and owned by the pod, so ``kai-ray schedule`` shows where the pod goes.
A template that does not exist leaves the claim unresolved (the pod waits, with the reason).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kai_ray.io.fields import ObjectReader
from kai_ray.io.parse_dra import (
    claim_from_template,
    parse_claim_template,
    parse_device_class,
    parse_resource_claim,
    parse_resource_slice,
)
from kai_ray.model import DeviceClass, DraObjects, Pod, ResourceClaim, ResourceSlice

DRA_KINDS = ("ResourceSlice", "DeviceClass", "ResourceClaim", "ResourceClaimTemplate")


class DraReader:
    def __init__(self) -> None:
        self.slices: dict[str, ResourceSlice] = {}
        self.classes: dict[str, DeviceClass] = {}
        self.claims: dict[str, ResourceClaim] = {}
        self.templates: dict[str, ResourceClaim] = {}

    def add(self, kind: str, reader: ObjectReader) -> None:
        if kind == "ResourceSlice":
            self._put(self.slices, reader.name, parse_resource_slice(reader), reader, False)
        elif kind == "DeviceClass":
            self._put(self.classes, reader.name, parse_device_class(reader), reader, False)
        elif kind == "ResourceClaim":
            claim = parse_resource_claim(reader)
            self._put(self.claims, claim.key, claim, reader, True)
        else:
            template = parse_claim_template(reader)
            self._put(self.templates, template.key, template, reader, True)

    @staticmethod
    def _put(store: dict[str, Any], key: str, value: object, reader: ObjectReader, namespaced: bool) -> None:
        if key in store:
            raise reader.fail("metadata.name", "appears twice in the snapshot", namespaced)
        store[key] = value

    def resolve(self, pods: dict[str, Pod]) -> DraObjects:
        """Fill in template claims not made yet (changes ``pods`` in place); the DRA objects."""
        for key, pod in list(pods.items()):
            if not any(c.claim is None and c.template for c in pod.resource_claims):
                continue
            claims = []
            for pod_claim in pod.resource_claims:
                template = self.templates.get(f"{pod.namespace}/{pod_claim.template}") if pod_claim.template else None
                if pod_claim.claim is None and template is not None:
                    made = claim_from_template(template, pod.name, pod_claim.name)
                    self.claims.setdefault(made.key, made)
                    pod_claim = replace(pod_claim, claim=made.name)
                claims.append(pod_claim)
            pods[key] = replace(pod, resource_claims=tuple(claims))
        return DraObjects(tuple(self.slices.values()), tuple(self.classes.values()), tuple(self.claims.values()))
