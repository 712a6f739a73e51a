"""Pods and PodGroups of the common shape are read the short way, and the short way agrees.

``parse_pod`` and ``parse_pod_group`` first try a reader of the shape nearly every object has
and fall back to reading field by field. On any input, odd shapes and malformed fields
included, the two ways must give the same record, or the same error and the same warnings.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai_ray import labels as L
from kai_ray.errors import InputError
from kai_ray.io import parse_core, parse_kai
from kai_ray.io.fields import ObjectReader
from kai_ray.io.parse_core import parse_pod
from kai_ray.io.parse_kai import parse_pod_group
from tests import manifests as M

PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(parse: Any, doc: dict[str, Any], lenient: bool) -> tuple[Any, list[str]]:
    """What parsing gives: the record or the error line, and the warnings."""
    warnings: list[str] = []
    try:
        record = parse(ObjectReader(doc, 3), warnings if lenient else None)
    except InputError as exc:
        record = f"error: {exc}"
    return record, warnings


def pod_both_ways(doc: dict[str, Any], lenient: bool) -> tuple[Any, Any]:
    fast = outcome(parse_pod, doc, lenient)
    with mock.patch.object(parse_core, "_common_pod", return_value=None):
        slow = outcome(parse_pod, doc, lenient)
    return fast, slow


def group_both_ways(doc: dict[str, Any], lenient: bool) -> tuple[Any, Any]:
    fast = outcome(parse_pod_group, doc, lenient)
    with mock.patch.object(parse_kai, "_common_parts", return_value=None):
        slow = outcome(parse_pod_group, doc, lenient)
    return fast, slow


def test_the_common_shapes_take_the_short_way() -> None:
    pod = M.pod("p", "q", gpu=1, group="g", labels={"app": "x"})
    pod["spec"]["tolerations"] = [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
    pod["status"] = {"phase": "Pending"}
    assert parse_core._common_pod(ObjectReader(pod, 0)) is not None
    group = M.pod_group("g", "q", min_member=8, priority_class_name="train")
    assert parse_kai._common_parts(ObjectReader(group, 0)) is not None


def test_a_common_pod_is_the_same_record_either_way() -> None:
    pod = M.pod("p", "q", gpu=2, group="g", node_name="n1", phase="Running", labels={"runai-gpu-group": "x"})
    fast, slow = pod_both_ways(pod, lenient=True)
    assert fast == slow
    assert fast[0].state.value == "Running"


TEXT = st.one_of(st.sampled_from(["", "a", "team-a", "train", "1", "-3", "x y", "0.5", "2"]), st.text(max_size=6))
ODD = st.one_of(st.none(), st.integers(-3, 3), st.booleans(), st.floats(allow_nan=True), st.lists(TEXT, max_size=2))
TIMES = st.sampled_from(["", "2025-01-01T10:00:00Z", "2025-01-01T10:00:00+02:00"])
ODD_TIMES = st.one_of(st.sampled_from(["yesterday", "2025-13-01T00:00:00Z"]), st.just(datetime(2025, 1, 1, tzinfo=UTC)))
QUANTITIES = st.sampled_from(["1", "500m", "4Gi", "2", "0", 1, 8])
ODD_QUANTITIES = st.sampled_from(["0.5", "-1", "1e400", "lots", "", "1.5", -1, 0.5])
RESOURCES = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods", "example.com/fpga", "ephemeral-storage"])
_ABSENT = object()


class Shapes:
    """Draws the fields of one object: well-formed or absent, and, for an odd object, now and
    then of another type or malformed."""

    def __init__(self, draw: Any) -> None:
        self.draw = draw
        self.odd = draw(st.integers(0, 2)) == 0

    def pick(self, value: st.SearchStrategy[Any], odd: st.SearchStrategy[Any] = ODD, required: bool = False) -> Any:
        choices = [value] * 4 + ([] if required and not self.odd else [st.just(_ABSENT)]) + ([odd] if self.odd else [])
        return self.draw(st.one_of(*choices))

    def sometimes(self, value: st.SearchStrategy[Any], one_in: int = 5) -> Any:
        return self.draw(value) if self.draw(st.integers(1, one_in)) == 1 else _ABSENT

    def text_map(self, special: list[str]) -> Any:
        keys = st.one_of(st.sampled_from(["app", "team", "tier"]), st.sampled_from(special))
        return self.pick(st.dictionaries(keys, st.one_of(TEXT, ODD) if self.odd else TEXT, max_size=4))


def put(target: dict[str, Any], key: str, value: Any) -> None:
    if value is not _ABSENT:
        target[key] = value


POD_LABELS = [
    L.QUEUE_LABEL,
    L.LEGACY_QUEUE_LABEL,
    L.TASK_PRIORITY_LABEL,
    L.GPU_GROUP_LABEL,
    L.GPU_GROUP_LABEL + "/a",
    L.SUBGROUP_LABEL,
    L.KUBEFLOW_ROLE_LABEL,
    L.RAY_NODE_TYPE_LABEL,
    L.PRIORITY_CLASS_LABEL,
]
POD_ANNOTATIONS = [
    L.POD_GROUP_ANNOTATION,
    L.GPU_FRACTION_ANNOTATION,
    L.GPU_MEMORY_ANNOTATION,
    L.GPU_FRACTION_DEVICES_ANNOTATION,
]
TOLERATION = st.fixed_dictionaries(
    {}, optional={"key": TEXT, "operator": st.sampled_from(["Exists", "Equal"]), "value": TEXT, "effect": TEXT}
)
AFFINITY = st.sampled_from(
    [
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
                }
            }
        },
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"x": [1]}]}}},
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": "zone"}}},
        {"podAntiAffinity": {}},
    ]
)
CLAIMS = st.sampled_from([[], [{"name": "gpu", "resourceClaimName": "claim-1"}], [{"name": "x"}], "claims"])


def containers(shapes: Shapes) -> Any:
    quantities = st.one_of(QUANTITIES, ODD_QUANTITIES) if shapes.odd else QUANTITIES
    out = []
    for _ in range(shapes.draw(st.integers(0 if shapes.odd else 1, 2))):
        sections: dict[str, Any] = {}
        for section in ("requests", "limits"):
            put(sections, section, shapes.pick(st.dictionaries(RESOURCES, quantities, max_size=3)))
        container: dict[str, Any] = {"name": "c"}
        put(container, "resources", shapes.pick(st.just(sections)))
        out.append(container)
    return shapes.pick(st.just(out), required=True)


@st.composite
def pods(draw: Any) -> dict[str, Any]:
    shapes = Shapes(draw)
    metadata: dict[str, Any] = {"name": "p", "namespace": "ns"}
    put(metadata, "uid", shapes.pick(TEXT))
    put(metadata, "labels", shapes.text_map(POD_LABELS))
    put(metadata, "annotations", shapes.text_map(POD_ANNOTATIONS))
    put(metadata, "creationTimestamp", shapes.pick(TIMES, ODD_TIMES))
    put(metadata, "deletionTimestamp", shapes.sometimes(TIMES, 8))
    spec: dict[str, Any] = {}
    put(spec, "containers", containers(shapes))
    put(spec, "initContainers", shapes.sometimes(st.just(containers(shapes))))
    put(spec, "overhead", shapes.sometimes(st.dictionaries(RESOURCES, QUANTITIES, max_size=2)))
    put(spec, "affinity", shapes.sometimes(AFFINITY))
    put(spec, "resourceClaims", shapes.sometimes(CLAIMS))
    put(spec, "schedulerName", shapes.pick(st.sampled_from(["kai-scheduler", "default-scheduler"])))
    put(spec, "nodeSelector", shapes.pick(st.dictionaries(TEXT, TEXT, max_size=2)))
    put(spec, "tolerations", shapes.pick(st.lists(TOLERATION, max_size=3), st.lists(st.one_of(TOLERATION, TEXT))))
    put(spec, "priorityClassName", shapes.pick(TEXT))
    put(spec, "nodeName", shapes.pick(st.sampled_from(["", "node-1"])))
    status: dict[str, Any] = {}
    put(status, "phase", shapes.pick(st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown"])))
    put(status, "nominatedNodeName", shapes.pick(st.sampled_from(["", "node-2"])))
    claim_statuses = st.sampled_from([[], [{"name": "x", "resourceClaimName": "c"}]])
    put(status, "resourceClaimStatuses", shapes.sometimes(claim_statuses))
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata}
    put(doc, "spec", shapes.pick(st.just(spec), required=True))
    put(doc, "status", shapes.pick(st.just(status)))
    return doc


@PROPERTY
@given(pods(), st.booleans())
def test_pods_read_the_short_way_agree_with_the_long_way(doc: dict[str, Any], lenient: bool) -> None:
    fast, slow = pod_both_ways(doc, lenient)
    assert fast == slow


GROUP_LABELS = [L.QUEUE_LABEL, L.PRIORITY_CLASS_LABEL, L.PREEMPTIBILITY_LABEL]
GROUP_ANNOTATIONS = [
    L.STALENESS_GRACE_ANNOTATION,
    L.PREEMPTION_DELAY_ANNOTATION,
    L.EXPECTED_RUNTIME_ANNOTATION,
    L.STALE_TIMESTAMP_ANNOTATION,
    L.LAST_START_ANNOTATION,
    L.LAST_EVICTION_ANNOTATION,
]
DURATIONS = st.sampled_from(["", "60s", "1h30m", "-5s", "soon", 30, 0])
ODD_MIN_MEMBERS = st.sampled_from([-1, 2**53, 2**53 + 1, 10**20, 2.0, 2.5, "3", True])


@st.composite
def pod_groups(draw: Any) -> dict[str, Any]:
    shapes = Shapes(draw)
    metadata: dict[str, Any] = {"name": "g", "namespace": "ns"}
    put(metadata, "uid", shapes.pick(TEXT))
    put(metadata, "labels", shapes.text_map(GROUP_LABELS))
    annotation_values = st.one_of(TIMES, ODD_TIMES, DURATIONS)
    annotations = st.dictionaries(st.sampled_from(GROUP_ANNOTATIONS), annotation_values, max_size=3)
    put(metadata, "annotations", shapes.pick(annotations) if shapes.odd else _ABSENT)
    put(metadata, "creationTimestamp", shapes.pick(TIMES, ODD_TIMES))
    spec: dict[str, Any] = {}
    put(spec, "minMember", shapes.pick(st.integers(0, 10), ODD_MIN_MEMBERS))
    put(spec, "queue", shapes.pick(TEXT))
    put(spec, "priorityClassName", shapes.pick(TEXT))
    put(spec, "preemptibility", shapes.pick(st.sampled_from(["preemptible", "non-preemptible", "sometimes", ""])))
    put(spec, "minSubGroup", shapes.sometimes(st.one_of(st.integers(-1, 3), ODD)))
    sub_groups = st.sampled_from([[], [{"name": "a", "minMember": 1}], {}, [{"name": "a"}]])
    put(spec, "subGroups", shapes.sometimes(sub_groups))
    put(spec, "topologyConstraint", shapes.sometimes(st.sampled_from([None, {}, {"topology": "t"}, "t"])))
    put(spec, "stalenessGracePeriod", shapes.sometimes(DURATIONS))
    put(spec, "preemptionDelay", shapes.sometimes(DURATIONS))
    doc: dict[str, Any] = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": metadata}
    put(doc, "spec", shapes.pick(st.just(spec)))
    return doc


@PROPERTY
@given(pod_groups(), st.booleans())
def test_pod_groups_read_the_short_way_agree_with_the_long_way(doc: dict[str, Any], lenient: bool) -> None:
    fast, slow = group_both_ways(doc, lenient)
    assert fast == slow
