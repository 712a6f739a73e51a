"""End-to-end throughput through the embedded API server: pods created -> bound, confirmed by watch.

The dev cluster runs in its own process (as an API server would); the scheduler loop
(in-process coordinator) and the load driver share this one. The figure includes HTTP,
JSON and watch fan-out on both sides, all on the same two cores.

    python -m loadtests.bench_devcluster --nodes 1000 --pods 5000
"""

from __future__ import annotations

import argparse
import asyncio

from prometheus_client import CollectorRegistry

from coordinator.coordinator import Coordinator
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.config import SchedulerConfig
from loadtests.dev_cluster_run import dev_cluster, scheduling
from loadtests.kwok_driver import Driver, LoadReport


async def run(nodes: int, pods: int, rate: float, period: float) -> LoadReport:
    config = SchedulerConfig()

    def make(_: int) -> Coordinator:
        return in_process_coordinator(config)

    async with (
        dev_cluster(nodes) as kubeconfig,
        scheduling(kubeconfig, config.schedulerName, make, period) as (
            driver_api,
            registry,
        ),
    ):
        # One GPU per pod: the default 1,000 synthetic nodes hold 5,200 GPUs, so every pod fits
        # and the figure measures scheduling and binding, not waiting for capacity.
        report = await Driver(driver_api, pods, rate, timeout=600, gpu_choices=(1,)).run()
        print("seconds per loop step:", _step_seconds(registry))
        return report


def _step_seconds(registry: CollectorRegistry) -> dict[str, float]:
    out = {}
    for family in registry.collect():
        if family.name == "kai_ray_loop_step_duration_seconds":
            for sample in family.samples:
                if sample.name.endswith("_sum"):
                    out[sample.labels["step"]] = round(sample.value, 2)
    return dict(sorted(out.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--rate", type=float, default=0.0, help="pods created per second (0: as fast as possible)")
    parser.add_argument("--period", type=float, default=0.5, help="seconds between scheduling cycles")
    args = parser.parse_args()
    report = asyncio.run(run(args.nodes, args.pods, args.rate, args.period))
    print(report.text())
    print(f"pods created at {report.created_per_second:.0f}/s")
    return 0 if report.partial_gangs == 0 and report.bound == report.pods else 1


if __name__ == "__main__":
    raise SystemExit(main())
