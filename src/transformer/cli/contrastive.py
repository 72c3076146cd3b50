"""`evaluate --images` for a text-image dual encoder: zero-shot classification and retrieval
(imported by cli/evaluation.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import (
    UserError,
    note,
)
from .loading import dual_encoder, is_contrastive

__all__ = ["PLOTTED_NAMES", "evaluate_contrastive", "is_contrastive"]

PLOTTED_NAMES = 30
"""--plot draws at most this many names (a confusion matrix of 1,000 names is not a picture):
those most often confused, as gold or as prediction."""


def evaluate_contrastive(args: argparse.Namespace) -> None:
    """`evaluate --images SPLIT` of a dual encoder: zero-shot accuracy (each image given the
    nearest of the split's names), recall@1 and @5 both ways (evaluation.retrieval); --plot
    draws the confusion matrix, --output writes each image's predicted name."""
    from ..evaluation.retrieval import RECALL_AT, score_retrieval
    from .common import check_output, check_picture, write_text

    others = [
        flag
        for flag, value in (
            ("--text", args.text),
            ("--src", args.src),
            ("--ref", args.ref),
            ("--tsv", args.tsv),
            ("--classifier", getattr(args, "classifier", None)),
        )
        if value
    ]
    if others:
        raise UserError(
            f"give --images (a dual encoder's zero-shot and retrieval scores) alone, without "
            f"{', '.join(others)}"
        )
    if args.plot:
        check_picture("--plot", args.plot, "the picture")
    if args.output:
        check_output(args.output)
    pipeline = dual_encoder(args, "evaluate")
    scores, predicted = score_retrieval(pipeline, args.images)
    c = scores.classification
    if args.output:
        write_text(args.output, [c.labels[p] for p in predicted])
    at = " / ".join(f"@{k}" for k in RECALL_AT)

    def shares(recall: dict[int, float]) -> str:
        return " / ".join(f"{recall[k]:.2%}" for k in RECALL_AT)

    print(
        f"zero-shot accuracy {c.accuracy:.2%}  macro-F1 {c.macro_f1:.4f}  ({scores.images:,} "
        f"images of {args.images}, each given the nearest of its {scores.names:,} names)"
    )
    print(
        f"retrieval recall{at}: image->text {shares(scores.image_to_text)}  text->image "
        f"{shares(scores.text_to_image)}"
    )
    if args.plot:
        _plot(args, c)


def _plot(args: argparse.Namespace, scores) -> None:
    """The confusion matrix; over PLOTTED_NAMES names, of the ones most often confused."""
    from ..evaluation.metrics import ClassificationScores
    from ..viz.confusion import plot_confusion

    n = len(scores.labels)
    title = (
        f"{Path(args.model_dir).name} on {Path(args.images).name}: zero-shot accuracy "
        f"{scores.accuracy:.1%}"
    )
    if n > PLOTTED_NAMES:
        m = scores.confusion
        errors = [sum(m[i]) + sum(row[i] for row in m) - 2 * m[i][i] for i in range(n)]
        keep = sorted(sorted(range(n), key=lambda i: -errors[i])[:PLOTTED_NAMES])
        scores = ClassificationScores(
            [scores.labels[i] for i in keep], [[m[i][j] for j in keep] for i in keep]
        )
        title += f" ({PLOTTED_NAMES} of {n} names: the most confused)"
        note("evaluate", f"--plot shows {PLOTTED_NAMES} of the {n} names, the most confused")
    plot_confusion(scores, args.plot, title=title)
    print(f"wrote {args.plot}")
