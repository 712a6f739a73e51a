"""PNG charts of a simulation: GPU utilization and each leaf queue's GPUs against its fair share;
with time-based fair share also KAI's plot (allocation and fair share over time) and each
queue's running share of the GPU-hours."""

from __future__ import annotations

from pathlib import Path

from kai_ray.app.sim.report import SimMetrics


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
    if metrics.usage is not None and queues:
        written.append(_time_based(metrics, queues, directory))
    return written


def _time_based(metrics: SimMetrics, queues: list[str], directory: Path) -> Path:
    """KAI's docs/time-based-fairshare plot (GPU allocation and fair share over time), plus each
    queue's share of the GPU-hours so far, which converges to what its weight deserves."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(4, 1, figsize=(10, 11), sharex=True)
    held: dict[str, float] = dict.fromkeys(queues, 0.0)
    for name in queues:
        samples = metrics.queue_timeline[name]
        minutes = [t / 60 for t, _, _ in samples]
        axes[0].step(minutes, [a for _, a, _ in samples], where="post", label=name)
        axes[1].step(minutes, [f for _, _, f in samples], where="post", label=name)
        usage = metrics.usage.timeline.get(name, []) if metrics.usage is not None else []
        axes[2].plot([t / 60 for t, _ in usage], [u for _, u in usage], label=name)
    times = sorted({t for name in queues for t, _, _ in metrics.queue_timeline[name]})
    shares: dict[str, list[float]] = {name: [] for name in queues}
    last = 0.0
    level = {name: 0.0 for name in queues}
    current = {name: iter(metrics.queue_timeline[name]) for name in queues}
    pending = {name: next(current[name], None) for name in queues}
    for t in times:
        for name in queues:
            held[name] += level[name] * (t - last)
            while (sample := pending[name]) is not None and sample[0] <= t:
                level[name] = sample[1]
                pending[name] = next(current[name], None)
        last = t
        total = sum(held.values())
        for name in queues:
            shares[name].append(held[name] / total if total else float("nan"))
    for name in queues:
        axes[3].plot([t / 60 for t in times], shares[name], label=name)
    titles = (
        ("GPU allocation over time", "GPUs"),
        ("fair share over time", "GPUs"),
        ("usage: GPU-time over the window's capacity (decayed)", "usage"),
        ("share of the GPU-hours so far", "share"),
    )
    for axis, (title, label) in zip(axes, titles, strict=True):
        axis.set_title(title, fontsize=10)
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
        axis.legend(loc="upper right", fontsize=8)
    axes[3].set_ylim(0, 1)
    axes[3].set_xlabel("simulated minutes")
    figure.tight_layout()
    path = directory / "time-based-fair-share.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
