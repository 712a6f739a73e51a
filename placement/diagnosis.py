"""Why a pod fits no node: the nodes turned away, counted by reason, in KAI's wording.

A ``Diagnosis`` adds up across shards; ``describe`` words it as KAI's fit error.
"""

from __future__ import annotations

from dataclasses import dataclass

from placement.constraints import NOT_READY, UNSCHEDULABLE
from placement.shapes import TaskShape

# KAI's wording (its fit errors, and kube-scheduler's filter messages it passes on), so runbooks
# and tools written against KAI's messages keep working.
NO_NODES_FOUND = "no nodes with enough resources were found"
NOT_ENOUGH = "node(s) didn't have enough resources: "
NOT_ENOUGH_MIG = "node(s) didn't have enough of mig profile: "


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """Counts of nodes turned away, by reason; adds up across shards."""

    nodes: int
    counts: dict[str, int]
    largest: dict[str, float]  # the biggest allocatable among nodes the pod may use

    def merged(self, other: Diagnosis) -> Diagnosis:
        counts = dict(self.counts)
        for why, n in other.counts.items():
            counts[why] = counts.get(why, 0) + n
        largest = {k: max(self.largest.get(k, 0.0), other.largest.get(k, 0.0)) for k in {*self.largest, *other.largest}}
        return Diagnosis(self.nodes + other.nodes, counts, largest)

    def describe(self, shape: TaskShape) -> str:
        """KAI's compact fit error: "no nodes with enough resources were found: 4 node(s) didn't have
        enough resources: GPUs.", plus KAI's MaxNodePoolResources sentence when no node could ever
        hold the pod."""
        if self.nodes == 0:
            return f"{NO_NODES_FOUND}: there are no nodes."
        # Most common reason first, then by name: the text must not depend on which shard answered first.
        ranked = sorted(self.counts.items(), key=lambda item: (-item[1], item[0]))
        detail = ". ".join(f"{n} {why}" for why, n in ranked) or f"{self.nodes} node(s) did not fit"
        text = f"{NO_NODES_FOUND}: {detail}."
        if not self.largest:  # every node was turned away before its capacity was looked at
            if set(self.counts) <= {NOT_READY, UNSCHEDULABLE}:
                text += " Every node is not ready or cordoned."
            return text
        asks = shape.request
        for name, wanted, label, unit in (
            ("gpu", asks.gpu, "GPU", ""),
            ("cpu", asks.cpu / 1000, "CPU", " cores"),
            ("memory", asks.memory / 1e9, "memory", " GB"),
        ):
            biggest = self.largest.get(name, 0.0) / (1000 if name == "cpu" else 1e9 if name == "memory" else 1)
            if wanted > biggest + 1e-9:
                if biggest <= 0:
                    text += f" No node the pod may use has {label} resources."
                else:
                    text += f" Max {label} resources available in a single node is topped at {biggest:.3g}{unit}."
                break
        return text
