"""What the loop asks the binder for a fraction: the portion KAI computes on the chosen node."""

from __future__ import annotations

from typing import Any

from coordinator.coordinator import BindIntent
from tests.adapter import gpu_sharing_scenario as scenario
from tests.adapter.conftest import Env, queue, until
from tests.adapter.test_end_to_end import running


def _pod(name: str, **annotations: str) -> dict[str, Any]:
    manifest = scenario.fractional_pod(name, scenario.Setting())
    manifest["metadata"]["annotations"] = {
        k: v for k, v in manifest["metadata"]["annotations"].items() if k != "gpu-fraction"
    }
    manifest["metadata"]["annotations"].update(annotations)
    return manifest


async def test_a_gpu_memory_request_gets_its_portion_of_the_nodes_device_memory(env: Env) -> None:
    await env.create("/apis/scheduling.run.ai/v2/queues", queue("default-queue"))
    await env.create("/api/v1/namespaces/default/pods", _pod("mem", **{"gpu-memory": "20000"}))
    await env.create(
        "/api/v1/namespaces/default/pods", _pod("wide", **{"gpu-fraction": "0.3", "gpu-fraction-num-devices": "2"})
    )
    loop = env.loop()
    async with running(loop):
        await until(lambda: "default/mem" in loop.cache.pods and "kwok-node-0" in loop.cache.nodes)
        mem = loop.binds.request(BindIntent("default/mem", "kwok-node-0", ("g",), "r"))
        wide = loop.binds.request(BindIntent("default/wide", "kwok-node-0", ("g1", "g2"), "r"))
        # 20000 MiB of an 81920 MiB device is 0.2441...: KAI rounds up to hundredths.
        assert mem.fraction is not None and mem.fraction.portion == "0.25" and not mem.fraction.multi
        assert wide.fraction is not None and wide.fraction.portion == "0.30" and wide.fraction.multi

        def config(name: str) -> dict[str, str] | None:
            found = env.cluster.get("", "v1", "configmaps", f"{name}-shared-gpu-0", "default")
            return found["data"] if found else None

        await until(lambda: config("mem") and config("wide"), timeout=15)
    assert config("mem")["GPU_PORTION"] == "0.25"  # type: ignore[index]
    assert len(config("wide")["NVIDIA_VISIBLE_DEVICES"].split(",")) == 2  # type: ignore[index]
