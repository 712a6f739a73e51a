"""kwok's configuration for the fake GPU nodes: which nodes it manages and the Stages it plays.

Plain ``kwok`` (unlike ``kwokctl``) ships no default stages, so the whole node and pod lifecycle
is spelled out here, the same rules the dev cluster's simulated kubelet follows:

- a pod bound to a managed node turns Running (``pod-start``);
- annotation ``kai-ray.dev/run-seconds: "N"`` ends it N seconds after it started: Succeeded,
  or Failed when ``kai-ray.dev/exit-code`` is set to anything but ``"0"`` (``pod-finish-*``);
- a pod being deleted is removed at once (``pod-remove``): there is no container to stop;
- with node leases on, a node's Ready condition is refreshed now and then (``node-heartbeat``)
  while kwok renews its Lease, so a controller manager never finds it unreachable.

Managed nodes are the ones carrying kwok's ``kwok.x-k8s.io/node=fake`` annotation, which every
node of ``kai_ray/app/sim/cluster.py`` has.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]
MANAGED_NODES = "kwok.x-k8s.io/node=fake"
RUN_SECONDS = "kai-ray.dev/run-seconds"
EXIT_CODE = "kai-ray.dev/exit-code"
NOT_DELETING = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}


def _stage(name: str, kind: str, spec: Obj) -> Obj:
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {"resourceRef": {"apiGroup": "v1", "kind": kind}, **spec},
    }


def _container_states(state: str) -> str:
    """A statusTemplate fragment: one containerStatus per container, in ``state``."""
    return (
        "containerStatuses:\n"
        "{{ range .spec.containers }}\n"
        "- name: {{ .name | Quote }}\n"
        "  image: {{ .image | Quote }}\n"
        f"  ready: {'true' if state == 'running' else 'false'}\n"
        "  restartCount: 0\n"
        "  state:\n" + state_block(state) + "{{ end }}\n"
    )


def state_block(state: str) -> str:
    """Inside ``range .spec.containers``: ``.`` is the container, ``$`` the pod."""
    if state == "running":
        return "    running:\n      startedAt: {{ Now | Quote }}\n"
    return (
        "    terminated:\n"
        "      exitCode: {{ or (index $.metadata.annotations " + f'"{EXIT_CODE}"' + ') "0" }}\n'
        f"      reason: {'Completed' if state == 'succeeded' else 'Error'}\n"
        "      startedAt: {{ $.status.startTime | Quote }}\n"
        "      finishedAt: {{ Now | Quote }}\n"
    )


def pod_start() -> Obj:
    conditions = "".join(
        f"- type: {kind}\n  status: 'True'\n  lastTransitionTime: {{{{ Now | Quote }}}}\n"
        for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
    )
    template = (
        "phase: Running\n"
        "startTime: {{ Now | Quote }}\n"
        "{{ with NodeIPsWith .spec.nodeName }}hostIP: {{ index . 0 | Quote }}\n{{ end }}\n"
        "{{ with PodIPsWith .spec.nodeName false .metadata.uid .metadata.name .metadata.namespace }}"
        "podIP: {{ index . 0 | Quote }}\n{{ end }}\n"
        "conditions:\n" + conditions + _container_states("running")
    )
    return _stage(
        "pod-start",
        "Pod",
        {
            "selector": {
                "matchExpressions": [NOT_DELETING, {"key": ".status.phase", "operator": "In", "values": ["Pending"]}]
            },
            "next": {"statusTemplate": template},
        },
    )


def pod_finish(succeeded: bool) -> Obj:
    code = f'.metadata.annotations["{EXIT_CODE}"] // "0"'
    template = "phase: " + ("Succeeded" if succeeded else "Failed") + "\n"
    template += "conditions:\n- type: Ready\n  status: 'False'\n  reason: PodCompleted\n"
    template += "  lastTransitionTime: {{ Now | Quote }}\n"
    template += _container_states("succeeded" if succeeded else "failed")
    return _stage(
        "pod-finish-succeeded" if succeeded else "pod-finish-failed",
        "Pod",
        {
            "selector": {
                "matchExpressions": [
                    NOT_DELETING,
                    {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                    {"key": f'.metadata.annotations["{RUN_SECONDS}"]', "operator": "Exists"},
                    {"key": code, "operator": "In" if succeeded else "NotIn", "values": ["0"]},
                ]
            },
            # "N" + "s" is a Go duration; kwok counts it from when the stage first matched (Running).
            "delay": {
                "durationMilliseconds": 0,
                "durationFrom": {"expressionFrom": f'(.metadata.annotations["{RUN_SECONDS}"] + "s")'},
            },
            "next": {"statusTemplate": template},
        },
    )


def pod_remove() -> Obj:
    return _stage(
        "pod-remove",
        "Pod",
        {
            "selector": {"matchExpressions": [{"key": ".metadata.deletionTimestamp", "operator": "Exists"}]},
            "next": {"delete": True},
        },
    )


def node_heartbeat(every_seconds: int) -> Obj:
    conditions = (
        "conditions:\n"
        "{{ range NodeConditions }}\n"
        "- type: {{ .type | Quote }}\n"
        "  status: {{ .status | Quote }}\n"
        "  reason: {{ .reason | Quote }}\n"
        "  message: {{ .message | Quote }}\n"
        "  lastHeartbeatTime: {{ Now | Quote }}\n"
        "  lastTransitionTime: {{ or $.metadata.creationTimestamp Now | Quote }}\n"
        "{{ end }}\n"
    )
    return _stage(
        "node-heartbeat",
        "Node",
        {
            "selector": {
                "matchExpressions": [
                    {
                        "key": '.status.conditions.[] | select( .type == "Ready" ) | .status',
                        "operator": "In",
                        "values": ["True"],
                    }
                ]
            },
            "delay": {"durationMilliseconds": every_seconds * 1000, "jitterDurationMilliseconds": every_seconds * 1100},
            "next": {"statusTemplate": conditions},
        },
    )


def stages(heartbeat_seconds: int | None) -> list[Obj]:
    found = [pod_start(), pod_finish(True), pod_finish(False), pod_remove()]
    if heartbeat_seconds:
        found.append(node_heartbeat(heartbeat_seconds))
    return found


def write_config(path: Path, heartbeat_seconds: int | None) -> Path:
    """The ``--config`` file: the Stages, one YAML document each."""
    path.write_text(yaml.safe_dump_all(stages(heartbeat_seconds), sort_keys=False))
    return path
