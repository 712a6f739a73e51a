"""What the API server itself does for pods: defaults, validation, binding, graceful deletion.

- Create: status is reset to Pending with a QoS class; ``spec.priority`` is resolved from the
  PriorityClass (an unknown class is 403, as the Priority admission plugin answers); requests
  default to limits; containers must have a name and an image.
- Update: the spec is immutable except container images, tolerations, activeDeadlineSeconds and
  removing scheduling gates (adding one is refused, as is creating a bound pod with gates; a pod
  created gated starts with ``PodScheduled=False``, reason ``SchedulingGated``); ``spec.nodeName``
  is set only through ``pods/binding``.
- Binding: optional uid precondition (409 on mismatch), 409 when already bound, terminating or
  still gated (``spec.schedulingGates``).
  Like upstream, the target node is not required to exist; such a pod simply never starts.
- Delete: a pod that is unbound, finished, or deleted with gracePeriodSeconds=0 goes at once;
  otherwise it gets a deletionTimestamp and the node simulator removes it after the grace period.
"""

from __future__ import annotations

from typing import Any

from devcluster import errors
from devcluster.catalog import ResourceType
from devcluster.errors import ApiError
from devcluster.registry import DNS_LABEL, Causes, Registry, Strategy
from devcluster.validation import pod_resource_causes

Obj = dict[str, Any]
DEFAULT_GRACE = 30
MUTABLE_SPEC = ("activeDeadlineSeconds", "tolerations", "schedulingGates", "terminationGracePeriodSeconds")


def qos_class(pod: Obj) -> str:
    """Guaranteed when every container limits cpu and memory at its requests; BestEffort when none asks."""
    containers = [c for c in (pod.get("spec") or {}).get("containers") or [] if isinstance(c, dict)]
    asked = False
    guaranteed = bool(containers)
    for container in containers:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        asked = asked or any(k in requests or k in limits for k in ("cpu", "memory"))
        for name in ("cpu", "memory"):
            if name not in limits or str(requests.get(name, limits[name])) != str(limits[name]):
                guaranteed = False
    if not asked:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


class PodStrategy(Strategy):
    def prepare_create(self, reg: Registry, rt: ResourceType, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", DEFAULT_GRACE)
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("enableServiceLinks", True)
        for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
            if not isinstance(container, dict):
                continue
            resources = container.setdefault("resources", {})
            limits = resources.get("limits") or {}
            if limits:
                requests = resources.setdefault("requests", {})
                for name, value in limits.items():
                    requests.setdefault(name, value)  # requests default to limits
            image = str(container.get("image", ""))
            container.setdefault(
                "imagePullPolicy", "Always" if image.endswith(":latest") or ":" not in image else "IfNotPresent"
            )
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
        if reg.catalog.find("scheduling.k8s.io", "v1beta1", "podgroups") is None:
            spec.pop("schedulingGroup", None)  # a server without the Workload API drops the field
        self._resolve_priority(reg, obj)
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj)}
        if _gates(spec):  # what autoscalers read as "not waiting for a node"
            obj["status"]["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "SchedulingGated",
                    "message": "Scheduling is blocked due to non-empty scheduling gates",
                    "lastProbeTime": None,
                    "lastTransitionTime": reg.clock.timestamp(),
                }
            ]

    def _resolve_priority(self, reg: Registry, pod: Obj) -> None:
        spec = pod["spec"]
        classes = reg.catalog.require("scheduling.k8s.io", "v1", "priorityclasses")
        name = spec.get("priorityClassName")
        if name:
            found = reg.store.get(classes, "", name)
            if found is None:
                raise ApiError(
                    403,
                    "Forbidden",
                    f'pods "{pod["metadata"]["name"]}" is forbidden: no PriorityClass with name {name} was found',
                )
        else:
            found = next((c for c in reg.store.items(classes) if c.get("globalDefault")), None)
            if found is not None:
                spec["priorityClassName"] = found["metadata"]["name"]
        spec["priority"] = int(found.get("value", 0)) if found is not None else 0
        if found is not None:
            spec.setdefault("preemptionPolicy", found.get("preemptionPolicy", "PreemptLowerPriority"))

    def validate(self, reg: Registry, rt: ResourceType, obj: Obj, old: Obj | None) -> Causes:
        containers = (obj.get("spec") or {}).get("containers")
        if not isinstance(containers, list) or not containers:
            return [("spec.containers", "Required value")]
        causes: Causes = []
        seen = set()
        for i, container in enumerate(containers):
            if not isinstance(container, dict):
                causes.append((f"spec.containers[{i}]", "Invalid value: must be an object"))
                continue
            name = str(container.get("name", ""))
            if not name:
                causes.append((f"spec.containers[{i}].name", "Required value"))
            elif not DNS_LABEL.match(name) or name in seen:
                causes.append(
                    (f"spec.containers[{i}].name", f'{"Duplicate" if name in seen else "Invalid"} value: "{name}"')
                )
            seen.add(name)
            if not container.get("image") and old is None:
                causes.append((f"spec.containers[{i}].image", "Required value"))
        return causes + _gate_causes(obj, old) + pod_resource_causes(obj)

    def prepare_update(self, reg: Registry, rt: ResourceType, new: Obj, old: Obj, subresource: str) -> None:
        if subresource:
            return
        if _fixed_spec(new.get("spec") or {}) != _fixed_spec(old.get("spec") or {}):
            raise errors.invalid(
                "Pod",
                old["metadata"]["name"],
                [
                    (
                        "spec",
                        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
                        "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
                        "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
                        "set to 1 if it was previously negative)",
                    )
                ],
            )

    def delete(self, reg: Registry, rt: ResourceType, obj: Obj, options: Obj) -> Obj | None:
        meta, spec = obj["metadata"], obj.get("spec") or {}
        grace = options.get("gracePeriodSeconds")
        seconds = int(spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE) if grace is None else grace)
        if seconds <= 0 or not spec.get("nodeName") or is_terminal(obj):
            return None  # nothing runs that needs time to stop: the generic (immediate) path
        current = meta.get("deletionGracePeriodSeconds")
        if meta.get("deletionTimestamp") and current is not None and current <= seconds:
            return obj  # already terminating at least as fast
        terminating = {
            **obj,
            "metadata": {
                **meta,
                "deletionTimestamp": reg.clock.timestamp(reg.clock.now() + seconds),
                "deletionGracePeriodSeconds": seconds,
            },
        }
        return reg.store.replace(rt, terminating)


def _gates(spec: Obj) -> list[str]:
    gates = spec.get("schedulingGates") or []
    return [str(g.get("name", "")) if isinstance(g, dict) else str(g) for g in gates]


def _gate_causes(obj: Obj, old: Obj | None) -> Causes:
    """The API server's rules for gates: set only at creation and never on a pod created bound;
    afterwards they can only be removed."""
    spec = obj.get("spec") or {}
    gates = _gates(spec)
    if old is None:
        if gates and spec.get("nodeName"):
            return [("spec.nodeName", "Forbidden: cannot be set until all schedulingGates have been cleared")]
        return []
    before = set(_gates(old.get("spec") or {}))
    added = [gate for gate in gates if gate not in before]
    if added:
        return [
            ("spec.schedulingGates", f"Forbidden: only deletion is allowed, but found new scheduling gate '{added[0]}'")
        ]
    return []


def _fixed_spec(spec: Obj) -> Obj:
    """The parts of a pod spec an update may not change."""
    fixed = {k: v for k, v in spec.items() if k not in MUTABLE_SPEC}
    for key in ("containers", "initContainers"):
        if isinstance(fixed.get(key), list):
            fixed[key] = [
                {k: v for k, v in c.items() if k != "image"} if isinstance(c, dict) else c for c in fixed[key]
            ]
    return fixed


def bind(reg: Registry, pods: ResourceType, namespace: str, name: str, binding: Any) -> None:
    """POST pods/<name>/binding (or /bindings): set spec.nodeName and the PodScheduled condition."""
    if not isinstance(binding, dict):
        raise errors.bad_request("the request body must be a Binding object")
    meta = binding.get("metadata") or {}
    if meta.get("name") and meta["name"] != name:
        raise errors.bad_request("name in URL does not match name in Binding object")
    target = binding.get("target") or {}
    if target.get("kind") not in (None, "", "Node"):
        raise errors.invalid("Binding", name, [("target.kind", 'Unsupported value: must be empty or "Node"')])
    node = target.get("name")
    if not node:
        raise errors.invalid("Binding", name, [("target.name", "Required value")])
    pod = reg.get(pods, namespace, name)
    pod_meta = pod["metadata"]

    def refuse(why: str) -> ApiError:
        return errors.conflict("pods/binding", name, why)

    if meta.get("uid") and meta["uid"] != pod_meta["uid"]:
        raise refuse(f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: {pod_meta['uid']}")
    if pod_meta.get("deletionTimestamp"):
        raise refuse(f"pod {name} is being deleted, cannot be assigned to a host")
    if (pod.get("spec") or {}).get("nodeName"):
        raise refuse(f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"')
    if (pod.get("spec") or {}).get("schedulingGates"):
        raise refuse(f"pod {name} has non-empty .spec.schedulingGates")
    status = dict(pod.get("status") or {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    conditions.append(
        {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": reg.clock.timestamp()}
    )
    status["conditions"] = conditions
    annotations = {**(pod_meta.get("annotations") or {}), **(meta.get("annotations") or {})}
    bound_meta = {**pod_meta, "annotations": annotations} if annotations else dict(pod_meta)
    reg.store.replace(
        pods, {**pod, "metadata": bound_meta, "spec": {**pod["spec"], "nodeName": node}, "status": status}
    )
