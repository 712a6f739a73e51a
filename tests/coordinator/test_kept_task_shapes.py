"""The session cache's tasks share one shape object per distinct shape, found again by the pod
parts a shape is made of: pods that differ in any of them must never share a shape."""

from __future__ import annotations

from coordinator.kept_tasks import KeptTasks
from coordinator.node_facts import NodeFacts
from kai_ray.model import Pod
from kai_ray.model.objects import SelectorRequirement, Toleration
from kai_ray.model.resources import GpuShare, ResourceVector
from placement.shapes import TaskShape

ONE_GPU = ResourceVector.of(cpu=1_000, memory=4 * 2**30, gpu=1, pods=1)
NO_GPU = ResourceVector.of(cpu=1_000, memory=4 * 2**30, pods=1)
TOLERATE_KWOK = (Toleration("kwok.x-k8s.io/node", "Exists", "", "NoSchedule"),)


def _pod(name: str, **fields: object) -> Pod:
    base: dict[str, object] = {"requests": ONE_GPU, "tolerations": TOLERATE_KWOK}
    return Pod("ns", name, uid=name, scheduler_name="kai-scheduler", **{**base, **fields})  # type: ignore[arg-type]


def _shapes(*pods: Pod) -> list[TaskShape]:
    kept = KeptTasks("kai-scheduler", NodeFacts())
    kept.read_all({pod.key: pod for pod in pods})
    return [kept.tasks[pod.key].shape for pod in pods]


def test_equal_parts_share_one_shape_object() -> None:
    # Equal, not identical, parts: as two pods read from a file each have their own records.
    other_requests = ResourceVector.of(cpu=1_000, memory=4 * 2**30, gpu=1, pods=1)
    first, second = _shapes(_pod("a"), _pod("b", requests=other_requests, tolerations=tuple(TOLERATE_KWOK)))
    assert first is second
    assert first == TaskShape.of_pod(_pod("a"))


def test_any_differing_part_makes_its_own_shape() -> None:
    term = (SelectorRequirement("zone", "In", ("a",)),)
    variants = [
        _pod("base"),
        _pod("requests", requests=ResourceVector.of(cpu=1_000, memory=4 * 2**30, gpu=2, pods=1)),
        _pod("half", requests=NO_GPU, gpu_share=GpuShare(fraction=0.5)),
        _pod("quarter", requests=NO_GPU, gpu_share=GpuShare(fraction=0.25)),
        _pod("affinity", affinity=(term,)),
        _pod("tolerations", tolerations=()),
        _pod("selector", node_selector={"zone": "a"}),
        _pod("legacy", legacy_mig="gpu-fraction"),
    ]
    shapes = _shapes(*variants)
    assert len({id(shape) for shape in shapes}) == len(variants)
    for pod, shape in zip(variants, shapes, strict=True):
        assert shape == TaskShape.of_pod(pod), pod.name
