"""``with_changes``: the copy a bind makes of a pod record (and a job's clocks of its pod group)
is the record ``dataclasses.replace`` would make, whichever fields change and in what order."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from kai_ray.model import Pod, PodGroup, PodState
from kai_ray.model.records import with_changes
from tests.builders import JobSpec, build, node, queue


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
