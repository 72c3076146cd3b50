"""A sweep's main score per variant: each seed's value as a dot, the mean as a line."""

from __future__ import annotations

import os
import statistics
from pathlib import Path

from .common import save_figure


def plot_sweep(values: dict[str, list[float]], metric: str, out: str | os.PathLike) -> Path:
    """values: variant -> the metric of each of its runs (seeds), in the order to draw."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(4.0, 0.7 * len(values) + 2), 3.8), dpi=120)
    for x, runs in enumerate(values.values()):
        if runs:
            ax.scatter([x] * len(runs), runs, color="tab:blue", s=18, zorder=3)
            ax.hlines(statistics.fmean(runs), x - 0.3, x + 0.3, color="tab:orange", zorder=2)
    ax.set_xticks(range(len(values)), list(values), rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(metric.replace("_", " "))
    ax.grid(axis="y", alpha=0.3)
    ax.set_title("each seed (dots) and the mean (line) per variant", fontsize=9)
    fig.tight_layout()
    return save_figure(fig, out)
