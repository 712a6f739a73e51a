"""What the simulated kubelet does when it starts containers: devices, environment, output.

- **GPU device plugin.** Each node has ``nvidia.com/gpu`` devices numbered from 0. A pod that
  requests whole GPUs gets the lowest free indexes when it starts, and they stay taken until
  it finishes or is gone; a pod that asks for more than are free is refused at admission
  (Failed, ``UnexpectedAdmissionError``), as the kubelet does (a node that advertises no
  ``nvidia.com/gpu`` at all is not checked, as kwok does not). Its GPU containers get
  ``NVIDIA_VISIBLE_DEVICES`` with those indexes.
- **KAI's resource-reservation image.** A GPU reservation pod (label
  ``app: kai-resource-reservation``) writes the index of the device it got into its own
  annotation ``run.ai/reserve_for_gpu_index`` once it runs.
- **Environment.** ``env`` values, ``configMapKeyRef``, ``fieldRef`` and ``envFrom``
  ``configMapRef`` are resolved at start; a ConfigMap (or key) that is missing and not
  optional keeps the pod Pending with ``CreateContainerConfigError``, and the start is tried
  again later, as the kubelet retries.
- **Output.** A container whose command is ``sh -c``/``bash -c`` script prints what the
  script's ``echo`` statements print, with ``$VAR`` and ``${VAR}`` expanded from its
  environment; that is what ``pods/<name>/log`` serves. Nothing else is executed.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
GPU = "nvidia.com/gpu"
VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
GPU_INDEX_ANNOTATION = "run.ai/reserve_for_gpu_index"
RESERVATION_APP = "kai-resource-reservation"
_VAR = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


class ConfigError(Exception):
    """The container's environment cannot be built yet (CreateContainerConfigError)."""


@dataclass(slots=True)
class Started:
    """What starting a pod's containers produced."""

    devices: list[int] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


def gpus_requested(container: Obj) -> int:
    resources = container.get("resources") or {}
    amount = (resources.get("limits") or {}).get(GPU) or (resources.get("requests") or {}).get(GPU) or 0
    try:
        return int(str(amount))
    except ValueError:
        return 0


def is_reservation_pod(pod: Obj) -> bool:
    return ((pod.get("metadata") or {}).get("labels") or {}).get("app") == RESERVATION_APP


class ContainerRuntime:
    def __init__(self) -> None:
        self.taken: dict[str, dict[int, str]] = {}  # node -> GPU index -> pod uid

    def devices_of(self, node: str, uid: str) -> list[int]:
        return sorted(i for i, owner in self.taken.get(node, {}).items() if owner == uid)

    def start(self, pod: Obj, node_gpus: int, config_maps: dict[str, Obj]) -> Started:
        """Admit and start ``pod``: raises ConfigError (retry later) or ValueError (refused)."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        node, uid = str(spec.get("nodeName")), str(meta["uid"])
        containers = spec.get("containers") or []
        envs = {str(c.get("name")): self._environment(pod, c, config_maps) for c in containers}
        wanted = sum(gpus_requested(c) for c in containers)
        taken = self.taken.setdefault(node, {})
        mine = self.devices_of(node, uid)
        free = [i for i in range(node_gpus) if i not in taken]
        if node_gpus and len(mine) < wanted and len(free) < wanted - len(mine):
            raise ValueError(
                f"Allocate failed due to requested number of devices unavailable for {GPU}. "
                f"Requested: {wanted}, Available: {len(free)}"
            )
        for index in free[: max(0, wanted - len(mine))]:
            taken[index] = uid
        started = Started(self.devices_of(node, uid))
        visible = ",".join(str(i) for i in started.devices)
        for container in containers:
            env = envs[str(container.get("name"))]
            if gpus_requested(container):
                env[VISIBLE_DEVICES] = visible
            started.logs[str(container.get("name"))] = _run(container, env)
        if is_reservation_pod(pod) and started.devices:
            started.annotations[GPU_INDEX_ANNOTATION] = visible
        return started

    def stop(self, node: str | None, uid: str) -> None:
        """The pod finished or is gone: its devices are free again."""
        for owned in [self.taken.get(node, {})] if node else list(self.taken.values()):
            for index in [i for i, owner in owned.items() if owner == uid]:
                del owned[index]

    def _environment(self, pod: Obj, container: Obj, config_maps: dict[str, Obj]) -> dict[str, str]:
        env: dict[str, str] = {}
        for source in container.get("envFrom") or []:
            ref = source.get("configMapRef")
            if not ref:
                continue
            found = config_maps.get(str(ref.get("name")))
            if found is None:
                if not ref.get("optional"):
                    raise ConfigError(f'configmap "{ref.get("name")}" not found')
                continue
            prefix = str(source.get("prefix") or "")
            env.update({prefix + k: str(v) for k, v in (found.get("data") or {}).items()})
        for item in container.get("env") or []:
            name = str(item.get("name"))
            if "value" in item:
                env[name] = str(item["value"])
                continue
            value_from = item.get("valueFrom") or {}
            if "configMapKeyRef" in value_from:
                ref = value_from["configMapKeyRef"]
                found = config_maps.get(str(ref.get("name")))
                data = (found or {}).get("data") or {}
                if found is None or ref.get("key") not in data:
                    if ref.get("optional"):
                        continue
                    what = f'configmap "{ref.get("name")}"' if found is None else f'key "{ref.get("key")}"'
                    raise ConfigError(f"{what} not found")
                env[name] = str(data[ref["key"]])
            elif "fieldRef" in value_from:
                env[name] = str(_field(pod, str(value_from["fieldRef"].get("fieldPath", ""))))
        return env


def _field(pod: Obj, path: str) -> Any:
    value: Any = pod
    for part in path.split("."):
        value = value.get(part, "") if isinstance(value, dict) else ""
    return value


def _run(container: Obj, env: dict[str, str]) -> str:
    """The output of a shell script's echo statements; empty for anything else."""
    argv = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
    if len(argv) < 3 or argv[0].rsplit("/", 1)[-1] not in ("sh", "bash") or argv[1] != "-c":
        return ""
    lines = []
    for statement in re.split(r"[;\n]|&&", argv[2]):
        words = statement.strip()
        if not words.startswith("echo ") and words != "echo":
            continue
        try:
            parts = shlex.split(words[4:])
        except ValueError:
            parts = words[4:].split()
        lines.append(" ".join(_VAR.sub(lambda m: env.get(m.group(1) or m.group(2), ""), p) for p in parts))
    return "".join(line + "\n" for line in lines)
