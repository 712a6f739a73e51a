"""The simulator with DRA nodes and claim-asking jobs beside fractional and whole-GPU ones."""

from __future__ import annotations

from kai_ray.app.runtime import in_process_coordinator
from kai_ray.app.sim.cluster import model_nodes
from kai_ray.app.sim.dra import with_dra_nodes
from kai_ray.app.sim.engine import InProcess, SimSettings, Simulation
from kai_ray.app.sim.workload import generate
from kai_ray.config import SchedulerConfig


def test_claim_jobs_run_on_dra_nodes_with_no_device_given_twice() -> None:
    nodes, dra = with_dra_nodes(model_nodes(40, taint=True), 0.5)
    dra_gpus = sum(len(s.devices) for s in dra.slices)
    plugin_gpus = sum(n.allocatable.gpu for n in nodes)
    assert dra_gpus > 0 and plugin_gpus > 0  # both kinds of GPU nodes
    workload = generate(dra_gpus + plugin_gpus, seed=3, jobs=80, load=1.3, dra_share=0.5)
    assert any(j.dra for j in workload.jobs) and any(j.fraction for j in workload.jobs)
    config = SchedulerConfig.model_validate({})
    simulation = Simulation(
        InProcess(in_process_coordinator(config, 1)), nodes, workload, SimSettings(period=10, horizon=2 * 3600), dra=dra
    )
    metrics = simulation.run()
    assert simulation.devices.allocations >= 10  # claims were allocated by binds, many times over
    assert simulation.devices.conflicts == 0
    assert metrics.partial_gangs == 0 and not metrics.overcommits and not metrics.accounting_errors
    started = {name for name, run in simulation.jobs.items() if run.first_start is not None}
    assert any(simulation._specs[name].dra for name in started)
