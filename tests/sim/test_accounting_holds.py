"""The accounting check reads the shards' holds alone (no labels, no taints): what each node
holds, shared GPUs included, must still match a recount from the pods, and a difference in
either must show."""

from __future__ import annotations

from dataclasses import replace

from kai_ray.app.sim import accounting
from kai_ray.app.sim.cluster import model_nodes
from kai_ray.model import GpuShare, Pod, PodState, ResourceVector
from placement.rows import export_holds
from shards.messages import ShardDeltas
from shards.shard import Shard

GIB = 2**30


def _pod(name: str, node: str, gpu: float = 0, share: GpuShare | None = None, group: str = "") -> Pod:
    return Pod(
        "team",
        name,
        state=PodState.RUNNING,
        node=node,
        requests=ResourceVector.of(cpu=1_000, memory=GIB, gpu=gpu, pods=1),
        gpu_share=share,
        gpu_groups=(group,) if group else (),
    )


def test_holds_match_the_recount_and_a_missing_shared_gpu_shows() -> None:
    nodes = model_nodes(6)
    gpu_nodes = [n.name for n in nodes if n.allocatable.gpu]
    pods = [
        _pod("whole", gpu_nodes[0], gpu=2),
        _pod("half", gpu_nodes[1], share=GpuShare(fraction=0.5), group="g-half"),
    ]
    shard = Shard(0)
    shard.apply(ShardDeltas(nodes_upserted=tuple(nodes), pods_upserted=tuple(pods)))
    held = accounting.from_holds([export_holds(shard.table)])
    counted = accounting.from_pods(pods, [n.name for n in nodes])
    assert accounting.differences(held, counted) == []
    assert held.shared == {gpu_nodes[1]: {"g-half"}}

    without_share = accounting.from_pods([pods[0], replace(pods[1], gpu_share=None, gpu_groups=())], held.names)
    assert accounting.differences(held, without_share)  # the shared GPU the recount lacks shows
    without_whole = accounting.from_pods(pods[1:], held.names)
    assert any(gpu_nodes[0] in d for d in accounting.differences(held, without_whole))
