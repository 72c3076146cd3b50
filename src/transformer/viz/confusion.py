"""A classifier's confusion matrix as a picture: rows the gold labels, columns the predicted ones,
each cell the share of its row (the recall of the diagonal), with the count written in it."""

from __future__ import annotations

import os
from pathlib import Path

from ..evaluation.metrics import ClassificationScores
from .common import save_figure


def plot_confusion(
    scores: ClassificationScores, out: str | os.PathLike, title: str | None = None
) -> Path:
    """Write the confusion matrix to out (.png, .svg or .pdf, atomically)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    labels, counts = scores.labels, scores.confusion
    n = len(labels)
    shares = [[c / max(sum(row), 1) for c in row] for row in counts]
    size = max(4.0, 0.6 * n + 2.5)
    fig, ax = plt.subplots(figsize=(size + 1, size), dpi=120)
    image = ax.imshow(shares, cmap="Blues", vmin=0.0, vmax=1.0)
    for i in range(n):
        for j in range(n):
            ax.text(
                j,
                i,
                f"{counts[i][j]:,}",
                ha="center",
                va="center",
                fontsize=8,
                color="white" if shares[i][j] > 0.5 else "black",
            )
    ax.set_xticks(range(n), labels, rotation=45, ha="right")
    ax.set_yticks(range(n), labels)
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    if title:
        ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="share of the gold row")
    fig.tight_layout()
    return save_figure(fig, out)
