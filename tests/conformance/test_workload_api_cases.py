"""kai-ray's own cases for gangs declared with the Kubernetes Workload API (``workload_api.json``),
in the format of KAI's scenarios and run the same way: the snapshot and config files
``kai-ray schedule`` would read, the same session, the same judge, the pending reasons and the
warnings a user reads. A job with ``workload_api`` is written as a scheduling.k8s.io PodGroup (and
Workload) instead of KAI's PodGroup, its pods naming it in ``spec.schedulingGroup``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kai_ray.app.cli.schedule_cmd import decide
from kai_ray.io.config import load_config
from kai_ray.io.snapshot_loader import load_snapshot
from tests.conformance.kai_scenarios import NAMESPACE, NOW, Doc, action_input, kubernetes_names, priority_class
from tests.conformance.test_kai_scenarios import schedule_differences

CASES: list[Doc] = json.loads(Path(__file__).with_name("workload_api.json").read_text("utf-8"))["scenarios"]
API = "scheduling.k8s.io/v1beta1"


def workload_api_documents(case: Doc) -> tuple[list[Doc], Doc, dict[str, str]]:
    """The case as KAI's scenarios are written, then each ``workload_api`` job's KAI PodGroup
    replaced by the Workload API's objects and its pods pointed at them."""
    given = action_input(case)
    job_names = kubernetes_names([j["name"] for j in case["jobs"]])
    pod_names = kubernetes_names([t["name"] for j in case["jobs"] for t in j["tasks"]])
    documents = list(given.documents)
    for job in case["jobs"]:
        declared = job.get("workload_api")
        if declared is None:
            continue
        name = job_names[job["name"]]
        documents = [d for d in documents if not (d["kind"] == "PodGroup" and d["metadata"]["name"] == name)]
        group_name = declared.get("podgroup") or name
        documents += _gang_objects(job, declared, group_name, name)
        pods = {pod_names[t["name"]] for t in job["tasks"]}
        for doc in documents:
            if doc["kind"] == "Pod" and doc["metadata"]["name"] in pods:
                _point_at(doc, declared, group_name)
    return documents, given.config, given.pod_keys


def _gang_objects(job: Doc, declared: Doc, group_name: str, job_name: str) -> list[Doc]:
    queue_label = {"kai.scheduler/queue": kubernetes_names([job["queue"]])[job["queue"]]}
    policy = {"gang": {"minCount": declared["min_count"]}} if declared["min_count"] is not None else {"basic": {}}
    out: list[Doc] = []
    spec: Doc = {"schedulingPolicy": policy, "priorityClassName": priority_class(job["priority"])}
    if declared.get("workload"):
        spec["workloadRef"] = {"workloadName": declared["workload"], "templateName": "workers"}
        out.append(
            {
                "apiVersion": API,
                "kind": "Workload",
                "metadata": {
                    "name": declared["workload"],
                    "namespace": NAMESPACE,
                    "labels": queue_label if declared["queue_on"] == "workload" else {},
                },
                "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": policy}]},
            }
        )
    labels = dict(queue_label) if declared["queue_on"] == "podgroup" else {}
    labels["kai.scheduler/preemptibility"] = "preemptible" if job["preemptible"] else "non-preemptible"
    if declared.get("object", True):
        metadata = {"name": group_name, "namespace": NAMESPACE, "labels": labels}
        out.append({"apiVersion": API, "kind": "PodGroup", "metadata": metadata, "spec": spec})
    return out


def _point_at(pod: Doc, declared: Doc, group_name: str) -> None:
    del pod["metadata"]["annotations"]["pod-group-name"]
    pod["spec"]["schedulingGroup"] = declared.get("reference", {"podGroupName": group_name})
    if declared["queue_on"] != "pods":  # the queue must come from where the case says
        del pod["metadata"]["labels"]["kai.scheduler/queue"]


def run_case(case: Doc, tmp_path: Path) -> list[str]:
    """One session on the case's files, and what differs: statuses, nodes, the words of the
    pending reasons, the warnings."""
    documents, config_doc, pod_keys = workload_api_documents(case)
    snapshot_file, config_file = tmp_path / "snapshot.yaml", tmp_path / "config.yaml"
    snapshot_file.write_text(yaml.safe_dump_all(documents, sort_keys=False), encoding="utf-8")
    config_file.write_text(yaml.safe_dump(config_doc, sort_keys=False), encoding="utf-8")
    config = load_config(config_file)
    snapshot = load_snapshot(snapshot_file, config.schedulerName)
    pods: dict[str, Any] = decide(snapshot, config, NOW.timestamp(), [case["action"]]).to_json()["pods"]
    differences = schedule_differences(case, pods, pod_keys)
    for task, text in case["expected"].get("reasons", {}).items():
        reason = pods[pod_keys[task]].get("reason", "")
        if text not in reason:
            differences.append(f"{task}: reason {reason!r} does not say {text!r}")
    if list(snapshot.report.warnings) != case["expected"].get("warnings", []):
        differences.append(f"warnings: {list(snapshot.report.warnings)!r}")
    return differences


@pytest.mark.parametrize("case", [pytest.param(c, id=c["id"]) for c in CASES])
def test_workload_api_case(case: Doc, tmp_path: Path) -> None:
    differences = run_case(case, tmp_path)
    assert not differences, "\n".join([case["description"], *differences, f"inputs: {tmp_path}"])


def test_every_case_has_a_unique_id_and_asks_only_what_the_runner_checks() -> None:
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids))
    for case in CASES:
        assert {"jobs", "tasks", "reasons", "warnings"} >= set(case["expected"]), case["id"]
        assert any("workload_api" in job for job in case["jobs"]), case["id"]
