"""Small nodes and pod requests for the shard property tests.

Nodes are tiny on purpose (few GPUs, few pod slots) so that a handful of operations
fills them and capacity checks, pod-slot limits and shared-GPU memory limits all bite.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kai_ray.model import GpuShare, Node, Pod, PodState, ResourceVector
from placement.holdings import Kind
from placement.placer import Choice
from placement.shapes import Constraints, TaskShape
from shards.messages import Placement

GIB = 2**30
FPGA = "example.com/fpga"  # an extended resource: the shard widens its columns when it first sees it


@dataclass(frozen=True, slots=True)
class NodeKind:
    cpu: float
    memory: float
    gpu: int
    pods: int
    gpu_mem: int
    scalars: dict[str, float] = field(default_factory=dict)


NODE_KINDS = {
    "gpu4": NodeKind(cpu=16_000, memory=64 * GIB, gpu=4, pods=5, gpu_mem=40_000),
    "gpu2": NodeKind(cpu=8_000, memory=32 * GIB, gpu=2, pods=4, gpu_mem=20_000),
    "cpu": NodeKind(cpu=8_000, memory=32 * GIB, gpu=0, pods=4, gpu_mem=100),
    "fpga": NodeKind(cpu=8_000, memory=32 * GIB, gpu=0, pods=3, gpu_mem=100, scalars={FPGA: 2}),
}


def make_node(name: str, kind: str, scale: float = 1.0, ready: bool = True, zone: str = "a") -> Node:
    """A node of ``kind``; ``scale`` grows or shrinks its allocatable (an update from the kubelet)."""
    spec = NODE_KINDS[kind]
    return Node(
        name,
        ResourceVector.of(
            cpu=spec.cpu * scale,
            memory=spec.memory * scale,
            gpu=round(spec.gpu * scale),
            pods=max(1, round(spec.pods * scale)),
            scalars={k: round(v * scale) for k, v in spec.scalars.items()},
        ),
        labels={"kubernetes.io/hostname": name, "pool": kind, "zone": zone},
        ready=ready,
        gpu_memory_mib=spec.gpu_mem,
    )


@dataclass(frozen=True, slots=True)
class Ask:
    """What one pod requests: ``gpu`` whole devices or a ``share`` of some."""

    cpu: float = 1000
    memory: float = 2 * GIB
    gpu: int = 0
    share: GpuShare | None = None
    scalars: tuple[tuple[str, float], ...] = ()
    selector: tuple[tuple[str, str], ...] = ()

    @property
    def requests(self) -> ResourceVector:
        return ResourceVector.of(cpu=self.cpu, memory=self.memory, gpu=self.gpu, pods=1, scalars=dict(self.scalars))

    @property
    def shape(self) -> TaskShape:
        return TaskShape(self.requests, self.share, Constraints(node_selector=self.selector))


ASKS = (
    Ask(cpu=2000, memory=8 * GIB),
    Ask(gpu=1),
    Ask(gpu=2, cpu=4000),
    Ask(gpu=4, cpu=4000, memory=16 * GIB),
    Ask(share=GpuShare(fraction=0.5)),
    Ask(share=GpuShare(fraction=0.25), selector=(("pool", "gpu2"),)),
    Ask(share=GpuShare(memory_mib=15_000)),
    Ask(share=GpuShare(fraction=0.5, devices=2)),
    Ask(cpu=500, memory=GIB, scalars=((FPGA, 1),)),
)


@dataclass(frozen=True, slots=True)
class Held:
    """A pod's hold as a test's model expects it."""

    key: str
    ask: Ask
    node: str
    kind: Kind
    groups: tuple[str, ...] = ()


def make_pod(key: str, ask: Ask, state: PodState, node: str | None, groups: tuple[str, ...] = ()) -> Pod:
    namespace, name = key.split("/")
    return Pod(
        namespace,
        name,
        uid=f"uid-{name}",
        state=state,
        node=node,
        requests=ask.requests,
        gpu_share=ask.share,
        gpu_groups=groups if ask.share else (),
        node_selector=dict(ask.selector),
    )


def placement(
    key: str,
    ask: Ask,
    node: str,
    pipelined: bool,
    shares: tuple[tuple[str, int], ...] = (),
    create: tuple[str, ...] = (),
) -> Placement:
    return Placement(
        key, node, ask.requests, pipelined, ask.share, shares if ask.share else (), create if ask.share else ()
    )


def placement_of(key: str, ask: Ask, node: str, choice: Choice) -> Placement:
    """What the coordinator would send to prepare after a session chose ``choice``."""
    return placement(key, ask, node, choice.pipelined, choice.shares, choice.create)
