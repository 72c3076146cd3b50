"""Training curves from a run directory's metrics.jsonl: loss (train and validation) and validation
BLEU over time."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .common import save_figure


def read_metrics(run_dir: str | os.PathLike) -> tuple[list[dict], list[dict]]:
    """(train records, validation records) of a run's metrics.jsonl."""
    file = Path(run_dir) / "metrics.jsonl"
    if not file.is_file():
        raise FileNotFoundError(
            f"{file} not found: pass a run directory written by transformer train"
        )
    records = [
        json.loads(line) for line in file.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    return [r for r in records if r.get("split") == "train"], [
        r for r in records if r.get("split") == "valid"
    ]


def plot_training_curves(
    run_dir: str | os.PathLike, out: str | os.PathLike, title: str | None = None
) -> Path:
    """Write a PNG: smoothed training loss and validation loss against minutes, validation BLEU on a
    second axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train, valid = read_metrics(run_dir)
    minutes = {r["step"]: r["elapsed_s"] / 60 for r in train}
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    window = max(1, len(train) // 100)
    smoothed = [
        sum(r["loss"] for r in train[max(0, i - window + 1) : i + 1])
        / len(train[max(0, i - window + 1) : i + 1])
        for i in range(len(train))
    ]
    ax.plot(
        [r["elapsed_s"] / 60 for r in train],
        smoothed,
        label="train loss (label-smoothed)",
        color="tab:blue",
        lw=1,
    )
    points = [(minutes[r["step"]], r["valid_loss"]) for r in valid if r["step"] in minutes]
    if points:
        ax.plot(*zip(*points, strict=True), "o-", label="validation loss", color="tab:orange", ms=3)
    ax.set_xlabel("training time (minutes)")
    ax.set_ylabel("loss (nats per token)")
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    bleu = [
        (minutes[r["step"]], r["valid_bleu"])
        for r in valid
        if "valid_bleu" in r and r["step"] in minutes
    ]
    if bleu:
        ax2 = ax.twinx()
        ax2.plot(
            *zip(*bleu, strict=True),
            "s-",
            color="tab:green",
            label="validation BLEU (greedy)",
            ms=3,
        )
        ax2.set_ylabel("BLEU")
        h2, l2 = ax2.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    ax.legend(handles, labels, loc="upper right")
    ax.set_title(title or f"training curves: {Path(run_dir).name}")
    fig.tight_layout()
    return save_figure(fig, out)
