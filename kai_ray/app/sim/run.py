"""One simulation from settings to report: build the cluster and workload, start the
scheduler (in one process, or a coordinator actor with shard actors on Ray), run, summarize."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from kai_ray.app.sim.cluster import model_nodes
from kai_ray.app.sim.dra import with_dra_nodes
from kai_ray.app.sim.engine import InProcess, Scheduler, SimSettings, Simulation
from kai_ray.app.sim.report import SimMetrics
from kai_ray.app.sim.scenarios import SCENARIOS, Scenario
from kai_ray.app.sim.summary import render_text
from kai_ray.app.sim.usage import SimUsage
from kai_ray.app.sim.workload import Workload, generate, offered_load
from kai_ray.config import SchedulerConfig
from kai_ray.model import DraObjects


@dataclass(slots=True)
class SimOutcome:
    metrics: SimMetrics
    nodes: int
    shards: int
    workload: Workload
    setup_seconds: float
    dra_jobs: int = 0  # jobs that asked for their GPUs through ResourceClaims
    device_conflicts: int = 0  # DRA devices held by two claims at once (must stay 0)

    def text(self) -> str:
        text = render_text(
            self.metrics,
            self.nodes,
            self.shards,
            self.setup_seconds,
            offered_load(self.workload, self.metrics.gpu_capacity),
        )
        if self.dra_jobs:
            text += (
                f"\nDRA: {self.dra_jobs} jobs asked for GPUs through ResourceClaims; "
                f"devices given twice: {self.device_conflicts} (must be 0)"
            )
        return text

    def to_json(self) -> dict[str, Any]:
        report = self.metrics.to_json(self.nodes, self.shards)
        report["draJobs"] = self.dra_jobs
        report["draDeviceConflicts"] = self.device_conflicts
        report["setupSeconds"] = self.setup_seconds
        report["offeredLoad"] = offered_load(self.workload, self.metrics.gpu_capacity)
        return report


class SimulationRun:
    def __init__(
        self,
        config: SchedulerConfig,
        nodes: int,
        jobs: int | None,
        shards: int,
        seed: int = 1,
        hours: float = 8.0,
        load: float = 1.0,
        period: float = 10.0,
        progress: bool = True,
        dra_share: float = 0.0,
        scenario: str | None = None,
        config_given: bool = True,
    ) -> None:
        self.scenario: Scenario | None = SCENARIOS[scenario](seed) if scenario else None
        if self.scenario is not None and not config_given:
            config = self.scenario.config  # the scenario's own settings unless a config file says otherwise
        self.config = config
        self.node_count = nodes
        self.jobs = jobs
        self.shards = shards
        self.seed = seed
        self.settings = SimSettings(period=period, horizon=hours * 3600)
        self.load = load
        self.progress = progress
        self.dra_share = dra_share

    def execute(self) -> SimOutcome:
        started = time.perf_counter()
        if self.scenario is not None:
            nodes, workload = list(self.scenario.nodes), self.scenario.workload
            dra = DraObjects()
            self.node_count = len(nodes)
        else:
            nodes, dra = with_dra_nodes(model_nodes(self.node_count, taint=True), self.dra_share)
            gpus = sum(n.allocatable.gpu for n in nodes) + sum(len(s.devices) for s in dra.slices)
            # Without a job count, jobs arrive over the first two thirds of the run, so most can finish.
            window = None if self.jobs is not None else self.settings.horizon * 2 / 3
            workload = generate(
                gpus,
                self.seed,
                jobs=self.jobs,
                arrival_window=window,
                load=self.load,
                has_gpu_nodes=gpus > 0,
                dra_share=self.dra_share,
            )
        usage = SimUsage(self.config.usageDBConfig, nodes) if self.config.usageDBConfig is not None else None
        scheduler, close = self._scheduler()
        setup = time.perf_counter() - started
        bar = self._bar()
        try:
            simulation = Simulation(
                scheduler,
                nodes,
                workload,
                self.settings,
                on_step=None if bar is None else _advance(bar, self.settings.horizon),
                dra=dra,
                usage=usage,
                mig_label_key=self.config.migWorkerNodeLabelKey,
            )
            simulation.metrics.usage = usage
            metrics = simulation.run()
        finally:
            if bar is not None:
                bar.close()
            close()
        dra_jobs = sum(1 for job in workload.jobs if job.dra)
        return SimOutcome(
            metrics, self.node_count, self.shards, workload, setup, dra_jobs, simulation.devices.conflicts
        )

    def _scheduler(self) -> tuple[Scheduler, Any]:
        if self.shards <= 1:
            from kai_ray.app.runtime import in_process_coordinator

            return InProcess(in_process_coordinator(self.config, 1)), lambda: None
        from kai_ray.app.actors import RemoteCoordinator, ensure_ray

        ensure_ray()
        remote = RemoteCoordinator(self.config, self.shards)
        return remote, remote.close

    def _bar(self) -> Any:
        if not self.progress:
            return None
        from tqdm import tqdm

        return tqdm(
            total=round(self.settings.horizon / 3600, 2),
            unit="sim h",
            desc="simulating",
            mininterval=1.0,
            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:.1f} sim h [{elapsed}<{remaining}]",
        )


def _advance(bar: Any, horizon: float) -> Any:
    """Move the bar to simulated time ``now`` (tqdm redraws at most a few times a second)."""
    shown = [0.0]

    def step(now: float) -> None:
        hours = min(now, horizon) / 3600
        bar.update(hours - shown[0])
        shown[0] = hours

    return step
