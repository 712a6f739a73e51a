"""Records made and copied without their initializer: ``with_changes`` gives the record
``dataclasses.replace`` would make, whichever fields change and in what order (a bind's copy of
a pod, a job's clocks on its pod group); ``fast_init`` the record the class makes."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import pytest

from coordinator.jobs import Job
from kai_ray.model import Pod, PodGroup, PodState
from kai_ray.model.objects import Toleration
from kai_ray.model.records import fast_init, with_changes
from placement.shapes import Constraints
from tests.builders import JobSpec, build, node, queue


@dataclass(frozen=True)
class _Unslotted:
    amount: int = 0


def _records() -> tuple[Pod, PodGroup]:
    snapshot = build([node("a", gpu=8)], [queue("q")], [JobSpec("j", "q", gpu=1, created=5.0, priority=70)])
    return snapshot.pods[0], snapshot.pod_groups[0]


def test_a_copy_equals_replace_field_for_field() -> None:
    pod, group = _records()
    copied = with_changes(pod, state=PodState.BINDING, node="a", gpu_groups=("g1",))
    assert copied == replace(pod, state=PodState.BINDING, node="a", gpu_groups=("g1",))
    assert copied is not pod and pod.state is PodState.PENDING
    # The same fields named in another order, and fewer of them: other copiers.
    assert with_changes(pod, node="a", state=PodState.BINDING) == replace(pod, state=PodState.BINDING, node="a")
    assert with_changes(pod, node="b") == replace(pod, node="b")
    clocks = with_changes(group, stale_since=7.0, last_start=3.0, last_eviction=None)
    assert clocks == replace(group, stale_since=7.0, last_start=3.0, last_eviction=None)
    unchanged = with_changes(group)
    assert all(getattr(unchanged, f.name) == getattr(group, f.name) for f in fields(group))


def test_a_field_the_record_does_not_have_is_refused() -> None:
    pod, _ = _records()
    with pytest.raises(TypeError, match="no field 'nodes'"):
        with_changes(pod, nodes="a")


def test_fast_init_makes_the_record_the_class_makes() -> None:
    pod, group = _records()
    for record in (pod, group):
        kind = type(record)
        values = {f.name: getattr(record, f.name) for f in fields(record)}
        made = fast_init(kind)(**values)
        assert type(made) is kind and made == record == kind(**values)
    # By position, in field order, as the class takes them.
    assert fast_init(Toleration)("k", "Exists", "", "NoSchedule") == Toleration("k", "Exists", "", "NoSchedule")


def test_fast_init_fills_defaults_and_fields_the_initializer_sets() -> None:
    make_pod = fast_init(Pod)
    assert make_pod(namespace="ns", name="p") == Pod("ns", "p")
    # A default factory runs per record, as in the class.
    assert make_pod(namespace="ns", name="p").labels == {}
    # A field outside the initializer (a cached hash) starts as the class starts it.
    made = fast_init(Constraints)(tolerations=(Toleration("k"),))
    assert made == Constraints(tolerations=(Toleration("k"),))
    assert hash(made) == hash(Constraints(tolerations=(Toleration("k"),)))


def test_fast_init_refuses_what_it_cannot_make_faithfully() -> None:
    with pytest.raises(TypeError, match="missing"):
        fast_init(Pod)(name="p")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="__post_init__"):
        fast_init(Job)
    with pytest.raises(TypeError, match="not a slotted dataclass"):
        fast_init(_Unslotted)  # its fields are no slots to set
