"""The changes a churn round makes, each written straight into the dev cluster's store (as a
controller or kubectl would, with the API's validation), and the faults it injects."""

from __future__ import annotations

import contextlib
import copy
import random
from typing import Any

from devcluster import DevCluster
from devcluster.clock import ManualClock
from devcluster.errors import ApiError
from tests.adapter.conftest import queue

Obj = dict[str, Any]
LEAVES = ("team-a", "team-b", "team-c")
CLASSES = (("train", 50), ("inference", 125))
POD_GROUPS = ("scheduling.run.ai", "v2alpha2", "podgroups")
QUEUES = ("scheduling.run.ai", "v2", "queues")
NS = "default"


QUEUE_SHAPES = {
    "dept": queue("dept", 16),
    "team-a": queue("team-a", 8, parent="dept"),
    "team-b": queue("team-b", 4, 12, parent="dept"),
    "team-c": queue("team-c", 0, parent="dept"),
}


def seed_objects(cluster: DevCluster) -> None:
    for name, value in CLASSES:
        cluster.create("scheduling.k8s.io", "v1", "priorityclasses", {"metadata": {"name": name}, "value": value})
    for shape in QUEUE_SHAPES.values():
        cluster.create(*QUEUES, copy.deepcopy(shape))


def _pod(name: str, rng: random.Random, gpus: int, group: str | None, queue: str, cpu: str = "1") -> Obj:
    resources: Obj = {"requests": {"cpu": cpu, "memory": "1Gi"}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    annotations: dict[str, str] = {}
    if group:
        annotations["pod-group-name"] = group
    if rng.random() < 0.5:  # it ends by itself: Succeeded, or Failed
        annotations["kai-ray.dev/run-seconds"] = f"{rng.uniform(1, 15):.1f}"
        if rng.random() < 0.25:
            annotations["kai-ray.dev/exit-code"] = "1"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"kai.scheduler/queue": queue}, "annotations": annotations},
        "spec": {
            "schedulerName": "kai-scheduler",
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "x", "resources": resources}],
        },
    }


class Ops:
    def __init__(self, cluster: DevCluster, clock: ManualClock, spare_nodes: list[Obj]) -> None:
        self.cluster = cluster
        self.clock = clock
        self.spare = list(spare_nodes)
        self.deleted: list[Obj] = []  # nodes deleted with pods still bound to them
        self.jobs = 0

    # ------------------------------------------------------------------ pods and jobs
    def job(self, rng: random.Random) -> None:
        self.jobs += 1
        name = f"j{self.jobs}"
        queue = rng.choice(LEAVES)
        kind = rng.choice(("gang", "gang", "single", "single", "fraction", "cpu", "plain"))
        priority = rng.choice(CLASSES)[0]
        if kind == "plain":  # no PodGroup: the pod grouper makes one
            pod = _pod(name, rng, rng.choice((1, 2)), None, queue)
            pod["spec"]["priorityClassName"] = priority
            self.cluster.create("", "v1", "pods", pod, NS)
            return
        size = rng.choice((2, 3, 4)) if kind == "gang" else rng.choice((1, 2)) if kind == "cpu" else 1
        minimum = size - 1 if kind == "gang" and rng.random() < 0.3 else size
        spec = {"minMember": minimum, "queue": queue, "priorityClassName": priority}
        self.cluster.create(*POD_GROUPS, {"metadata": {"name": name}, "spec": spec}, NS)
        gpus = {"gang": rng.choice((1, 2, 4)), "single": rng.choice((1, 2, 4, 8)), "fraction": 0, "cpu": 0}[kind]
        for i in range(size):
            pod = _pod(f"{name}-{i}", rng, gpus, name, queue, cpu="2" if kind == "cpu" else "1")
            if kind == "fraction":
                pod["metadata"]["annotations"]["gpu-fraction"] = rng.choice(("0.25", "0.5"))
            self.cluster.create("", "v1", "pods", pod, NS)

    def delete_pod(self, rng: random.Random) -> None:
        pods = self.cluster.objects("", "v1", "pods", NS)
        if pods:
            self.cluster.delete("", "v1", "pods", rng.choice(pods)["metadata"]["name"], NS)

    def delete_job(self, rng: random.Random) -> None:
        groups = self.cluster.objects(*POD_GROUPS, NS)
        if not groups:
            return
        name = rng.choice(groups)["metadata"]["name"]
        self.cluster.delete(*POD_GROUPS, name, NS)
        for pod in self.cluster.objects("", "v1", "pods", NS):
            if (pod["metadata"].get("annotations") or {}).get("pod-group-name") == name and rng.random() < 0.8:
                self.cluster.delete("", "v1", "pods", pod["metadata"]["name"], NS)

    def foreign(self, rng: random.Random) -> None:
        """Another scheduler's small pod, bound where it likes."""
        nodes = self.cluster.objects("", "v1", "nodes")
        if not nodes:
            return
        self.jobs += 1
        pod = _pod(f"other-{self.jobs}", rng, 0, None, "none", cpu="100m")
        pod["spec"]["schedulerName"] = "default-scheduler"
        pod["spec"]["nodeName"] = rng.choice(nodes)["metadata"]["name"]
        self.cluster.create("", "v1", "pods", pod, NS)

    def tick(self, rng: random.Random) -> None:
        """The kubelets' clock moves: pods start, finish, and terminating ones go."""
        self.clock.advance(rng.uniform(0.3, 4.0))
        assert self.cluster.simulator is not None
        self.cluster.simulator.step()

    # ------------------------------------------------------------------ nodes
    def cordon(self, rng: random.Random) -> None:
        nodes = self.cluster.objects("", "v1", "nodes")
        if nodes:
            node = rng.choice(nodes)
            flag = not (node.get("spec") or {}).get("unschedulable", False)
            self.cluster.patch("", "v1", "nodes", node["metadata"]["name"], {"spec": {"unschedulable": flag}})

    def readiness(self, rng: random.Random) -> None:
        nodes = self.cluster.objects("", "v1", "nodes")
        if nodes:
            node = rng.choice(nodes)
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in node["status"]["conditions"])
            condition = {"type": "Ready", "status": "False" if ready else "True", "reason": "Churn"}
            self.cluster.patch(
                "", "v1", "nodes", node["metadata"]["name"], {"status": {"conditions": [condition]}}, "", "status"
            )

    def delete_node(self, rng: random.Random) -> None:
        """Gone with its pods still bound to it (no pod GC here): they count again if it returns."""
        nodes = self.cluster.objects("", "v1", "nodes")
        if len(nodes) > 2:
            busy = {p["spec"].get("nodeName") for p in self.cluster.objects("", "v1", "pods", NS)}
            node = rng.choice([n for n in nodes if n["metadata"]["name"] in busy] or nodes)
            self.cluster.delete("", "v1", "nodes", node["metadata"]["name"])
            meta = {k: v for k, v in node["metadata"].items() if k in ("name", "labels", "annotations")}
            self.deleted.append({**node, "metadata": meta})

    def add_node(self, rng: random.Random) -> None:
        """Mostly a node that was deleted registers again (its pods still bound); else a new one."""
        if self.deleted and (rng.random() < 0.7 or not self.spare):
            self.cluster.create("", "v1", "nodes", self.deleted.pop())
        elif self.spare:
            self.cluster.create("", "v1", "nodes", self.spare.pop(rng.randrange(len(self.spare))))

    # ------------------------------------------------------------------ queues and faults
    def queue(self, rng: random.Random) -> None:
        name = rng.choice((*LEAVES, "team-c", "dept"))
        current = self.cluster.get(*QUEUES, name)
        if current is None:
            self.cluster.create(*QUEUES, copy.deepcopy(QUEUE_SHAPES[name]))
        elif name in ("team-c", "dept") and rng.random() < 0.5:
            self.cluster.delete(*QUEUES, name)  # its jobs (or, for dept, every team) have no usable queue
        else:
            limit = -1 if name == "dept" else rng.choice((-1, -1, 8, 12))
            gpu = {"quota": rng.choice((0, 2, 4, 8)), "limit": limit, "overQuotaWeight": rng.choice((1, 2))}
            self.cluster.patch(*QUEUES, name, {"spec": {"resources": {"gpu": gpu}}})

    def fault(self, rng: random.Random) -> None:
        faults = self.cluster.faults
        choice = rng.randrange(5)
        if choice == 0:
            waiting = [p for p in self.cluster.objects("", "v1", "pods", NS) if not p["spec"].get("nodeName")]
            if waiting:
                name = rng.choice(waiting)["metadata"]["name"]
                faults.fail("create", "pods", 500, subresource="binding", times=rng.randint(1, 6), name=name)
        elif choice == 1:
            faults.fail("create", "pods", 429, subresource="eviction", times=rng.randint(1, 3))
        elif choice == 2:
            self.cluster.drop_watches(abrupt=rng.random() < 0.5)
        elif choice == 3:
            self.cluster.expire_history()
            self.cluster.drop_watches(abrupt=False)
        else:
            faults.fail("list", rng.choice(("pods", "nodes", "podgroups")), 500, times=2)


WEIGHTS = {
    "job": 30,
    "tick": 20,
    "delete_pod": 8,
    "delete_job": 4,
    "cordon": 4,
    "readiness": 4,
    "delete_node": 3,
    "add_node": 4,
    "queue": 4,
    "fault": 8,
    "foreign": 2,
}


def random_op(rng: random.Random, ops: Ops) -> str:
    name = rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
    with contextlib.suppress(ApiError):  # e.g. a pod the kubelet removed a moment ago: the change did not happen
        getattr(ops, name)(rng)
    return name
