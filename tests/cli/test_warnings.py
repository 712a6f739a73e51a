"""Warnings about the input: each said, and a warning that many objects share said once, with
the count and a few names, so the one that differs is not buried."""

from __future__ import annotations

from pathlib import Path

from tests import manifests as m
from tests.cli.conftest import RunCli

NOW = "2026-01-03T00:00:00Z"


def _jobs(count: int, priority_class: str) -> list[m.Manifest]:
    objects: list[m.Manifest] = []
    for i in range(count):
        objects.append(m.pod_group(f"job-{i:03d}", "team-a", priority_class_name=priority_class))
        objects.append(m.pod(f"job-{i:03d}-0", "team-a", gpu=1, group=f"job-{i:03d}"))
    return objects


def _warnings(kai_ray: RunCli, path: Path, objects: list[m.Manifest]) -> list[str]:
    result = kai_ray("schedule", "--snapshot", m.write(path, objects), "--now", NOW)
    assert result.code == 0, result.err
    assert len(result.json()["pods"]) == sum(1 for o in objects if o["kind"] == "Pod")  # nothing lost
    return [line for line in result.error_lines if line.startswith("kai-ray: warning:")]


def test_a_warning_many_objects_share_is_one_line_with_the_count_and_the_first_names(
    kai_ray: RunCli, tmp_path: Path
) -> None:
    objects = [m.node("n1"), m.queue("team-a"), *_jobs(40, "nightly"), *_jobs(1, "weekly")[:1]]
    objects[-1]["metadata"]["name"] = "odd-one"
    lines = _warnings(kai_ray, tmp_path / "snapshot.yaml", objects)
    assert lines == [
        "kai-ray: warning: 40 PodGroups (team/job-000, team/job-001, team/job-002 and 37 more): "
        "PriorityClass 'nightly' does not exist, using the default priority",
        "kai-ray: warning: PodGroup team/odd-one: PriorityClass 'weekly' does not exist, using the default priority",
    ]


def test_a_few_objects_with_the_same_warning_are_each_named(kai_ray: RunCli, tmp_path: Path) -> None:
    objects = [m.node("n1"), m.queue("team-a"), *_jobs(3, "nightly")]
    lines = _warnings(kai_ray, tmp_path / "snapshot.yaml", objects)
    assert lines == [
        f"kai-ray: warning: PodGroup team/job-00{i}: PriorityClass 'nightly' does not exist, using the default priority"
        for i in range(3)
    ]
