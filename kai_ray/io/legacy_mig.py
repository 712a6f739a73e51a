"""Legacy MIG pods: a MIG profile asked for in an annotation with a whole number, as MIG was once
requested. KAI counts such a pod as asking for that profile and schedules it nowhere; so does
kai-ray (docs/mig.md)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from kai_ray.io.fields import ObjectReader
from kai_ray.model import ResourceVector, is_mig_resource

_WHOLE = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.ParseInt takes in base 10


def legacy_mig_annotation(annotations: Mapping[str, str]) -> str | None:
    """The annotation that makes a pod a legacy MIG pod for KAI (a MIG profile's name with a
    whole number: how MIG was once asked for), or None."""
    found = [name for name, value in annotations.items() if is_mig_resource(name) and _WHOLE.fullmatch(value)]
    return min(found) if found else None


def legacy_mig_warning(reader: ObjectReader, legacy: str, value: str, on_node: bool) -> str:
    text = (
        f"Pod {reader.namespace}/{reader.name}: metadata.annotations.{legacy} marks a legacy MIG pod; kai-ray, "
        f"as KAI, never schedules such a pod and counts it as asking for {legacy}: {value} (ask for the "
        "profile in the pod's resources instead)"
    )
    if on_node:  # KAI's other rule for these pods, which kai-ray does not follow
        text += "; KAI also keeps MIG pods off the node it runs on, kai-ray does not"
    return text


def legacy_mig_requests(requests: ResourceVector, profile: str, count: int) -> ResourceVector:
    """What KAI counts a legacy MIG pod as asking: its GPU request (whole GPUs, fractions, MIG
    profiles in its resources) replaced by ``count`` instances of the annotation's profile; cpu,
    memory and other resources as requested. A count below one asks for none."""
    scalars = {name: value for name, value in requests.scalars.items() if not is_mig_resource(name)}
    scalars[profile] = float(max(count, 0))
    return ResourceVector.of(requests.cpu, requests.memory, 0.0, requests.pods, scalars)
