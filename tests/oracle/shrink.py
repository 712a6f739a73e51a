"""Shrinking a case on which kai-ray and KAI disagree to a small one that still shows it.

Greedy, one simplification at a time, kept when the disagreement survives: drop a whole
job, a node (with the pods it runs), a single pod, a queue nobody uses, a config key, an
action of the list. Repeats until nothing more can be dropped.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import replace

from tests.oracle.manifests import Case, Doc

StillFails = Callable[[Case], bool]


def _key(doc: Doc) -> tuple[str, str]:
    return doc.get("kind", ""), doc["metadata"]["name"]


def _without(case: Case, drop: Callable[[Doc], bool]) -> Case:
    return replace(case, documents=[d for d in case.documents if not drop(d)])


def _jobs(case: Case) -> list[str]:
    return [d["metadata"]["name"] for d in case.documents if d.get("kind") == "PodGroup"]


def _pod_group(doc: Doc) -> str | None:
    if doc.get("kind") != "Pod":
        return None
    group: str | None = (doc["metadata"].get("annotations") or {}).get("pod-group-name")
    return group


def _candidates(case: Case) -> Iterator[Case]:
    for job in _jobs(case):
        yield _without(case, lambda d, job=job: _key(d) == ("PodGroup", job) or _pod_group(d) == job)  # type: ignore[misc]
    for node in [d["metadata"]["name"] for d in case.documents if d.get("kind") == "Node"]:
        yield _without(
            case,
            lambda d, node=node: (
                _key(d) == ("Node", node)  # type: ignore[misc]
                or d.get("kind") == "Pod"
                and node in ((d.get("spec") or {}).get("nodeName"), (d.get("status") or {}).get("nominatedNodeName"))
            ),
        )
    for pod in [d["metadata"]["name"] for d in case.documents if d.get("kind") == "Pod"]:
        yield _without(case, lambda d, pod=pod: _key(d) == ("Pod", pod))  # type: ignore[misc]
    used = {q for d in case.documents if d.get("kind") == "PodGroup" for q in [d["spec"].get("queue")]}
    parents = {d["spec"].get("parentQueue") for d in case.documents if d.get("kind") == "Queue"}
    for queue in [d["metadata"]["name"] for d in case.documents if d.get("kind") == "Queue"]:
        if queue not in used and queue not in parents:
            yield _without(case, lambda d, queue=queue: _key(d) == ("Queue", queue))  # type: ignore[misc]
    for key in list(case.config):
        smaller = dict(case.config)
        del smaller[key]
        yield replace(case, config=smaller)
    actions = case.actions.split(",")
    if len(actions) > 1:
        for i in range(len(actions)):
            yield replace(case, actions=",".join(actions[:i] + actions[i + 1 :]))
    yield from _simpler_objects(case)


def _simpler_objects(case: Case) -> Iterator[Case]:
    """Drop time-stamp annotations and node affinity, one object at a time."""
    for i, doc in enumerate(case.documents):
        meta = doc["metadata"]
        for key in list(meta.get("annotations") or {}):
            if key in ("pod-group-name", "gpu-fraction"):  # dropping these changes what the pod is
                continue
            simpler = copy.deepcopy(doc)
            del simpler["metadata"]["annotations"][key]
            yield replace(case, documents=case.documents[:i] + [simpler] + case.documents[i + 1 :])
        if (doc.get("spec") or {}).get("affinity"):
            simpler = copy.deepcopy(doc)
            del simpler["spec"]["affinity"]
            yield replace(case, documents=case.documents[:i] + [simpler] + case.documents[i + 1 :])


def shrink(case: Case, still_fails: StillFails, max_probes: int = 2000) -> Case:
    probes = 0
    progress = True
    while progress and probes < max_probes:
        progress = False
        for candidate in _candidates(case):
            probes += 1
            if still_fails(candidate):
                case = candidate
                progress = True
                break
            if probes >= max_probes:
                break
    return case
