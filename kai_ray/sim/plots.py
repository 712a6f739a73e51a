"""PNG charts of a simulation: GPU utilization and each leaf queue's GPUs against its fair share."""

from __future__ import annotations

from pathlib import Path

from kai_ray.sim.report import SimMetrics


def write_plots(metrics: SimMetrics, directory: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")  # files only; never a window
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    written = []

    figure, axis = plt.subplots(figsize=(9, 3.5))
    hours = [t / 3600 for t, _ in metrics.timeline]
    axis.step(hours, [u * 100 for _, u in metrics.timeline], where="post", color="tab:green")
    axis.set(
        xlabel="simulated hours",
        ylabel="GPUs in use (%)",
        ylim=(0, 105),
        title=f"GPU utilization ({metrics.gpu_capacity:,.0f} GPUs)",
    )
    axis.grid(alpha=0.3)
    path = directory / "gpu-utilization.png"
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    written.append(path)

    queues = [q for q in metrics.leaves if metrics.queue_timeline.get(q)]
    if queues:
        figure, axes = plt.subplots(len(queues), 1, figsize=(9, 1.9 * len(queues)), sharex=True, squeeze=False)
        for axis, name in zip(axes[:, 0], queues, strict=True):
            samples = metrics.queue_timeline[name]
            hours = [t / 3600 for t, _, _ in samples]
            axis.step(hours, [a for _, a, _ in samples], where="post", label="allocated")
            axis.step(hours, [f for _, _, f in samples], where="post", linestyle="--", label="fair share")
            axis.set_ylabel("GPUs")
            axis.set_title(name, fontsize=9, loc="left")
            axis.grid(alpha=0.3)
        axes[0, 0].legend(loc="upper right", fontsize=8)
        axes[-1, 0].set_xlabel("simulated hours")
        figure.tight_layout()
        path = directory / "queue-shares.png"
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)
    return written
