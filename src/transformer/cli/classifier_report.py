"""`evaluate --tsv` and `--images` of a classifier: accuracy, macro-F1, the per-class table and the
confusion matrix (with --output, --plot)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import UserError, check_picture, load_pipeline, note, write_text


def evaluate_classifier(args: argparse.Namespace) -> None:
    """Accuracy, macro-F1, per-class scores and the confusion matrix on --tsv texts or --images."""
    from ..data.text import DataError
    from ..decoding.inputs import truncation_note
    from ..evaluation.scoring import score_classifier
    from ..model.transformer import EncoderOnly

    flag = "--tsv" if args.tsv else "--images"
    if args.text or args.src or args.ref or (args.tsv and args.images):
        raise UserError(
            f"give {flag} (a classifier's accuracy) alone, without --text, --src, --ref or the "
            "other"
        )
    if args.plot:
        check_picture("--plot", args.plot, "the picture")
    pipeline = load_pipeline(args, "evaluate")
    if not isinstance(pipeline.model, EncoderOnly) or pipeline.model.config.n_classes == 0:
        raise UserError(f"{flag} is for classifiers: this model is not one")
    if (pipeline.model.config.vision is None) != bool(args.tsv):
        raise UserError(
            "this is an image classifier: use --images"
            if args.tsv
            else "this is a text classifier: use --tsv"
        )
    if args.images:
        scores, predicted = score_classifier(pipeline, args.images)
        return report(args, scores, predicted, f"images of {args.images}", args.images)
    if pipeline.labels is None:
        raise UserError(
            f"{args.model_dir} has no labels.json: evaluate --tsv needs a classifier trained here"
        )
    cut: list[int] = []
    try:
        scores, predicted = score_classifier(pipeline, args.tsv, on_truncate=cut.extend)
    except DataError as e:
        raise UserError(str(e)) from None
    if cut:
        note(
            "evaluate", truncation_note(cut, scores.total, pipeline.model.config.max_positions - 2)
        )
    report(args, scores, predicted, f"texts of {args.tsv}", args.tsv)


def report(args: argparse.Namespace, scores, predicted: list[int], what: str, source: str) -> None:
    """Accuracy, macro-F1, the per-class table and the confusion matrix (and --output, --plot)."""
    labels = scores.labels
    if args.output:
        write_text(args.output, [labels[p] for p in predicted])
    print(
        f"accuracy {scores.accuracy:.2%}  macro-F1 {scores.macro_f1:.4f}  ({scores.total:,} {what})"
    )
    width = max(map(len, labels))
    print(f"{'label':<{width}}  precision  recall      F1  support")
    for row in scores.per_class():
        print(
            f"{row['label']:<{width}}  {row['precision']:9.4f}  {row['recall']:6.4f}  "
            f"{row['f1']:6.4f}  {row['support']:7,}"
        )
    print("confusion matrix (rows: gold, columns: predicted, in the order above):")
    for label, counts in zip(labels, scores.confusion, strict=True):
        print(f"{label:<{width}}  " + " ".join(f"{n:6,}" for n in counts))
    if args.plot:
        from ..viz.confusion import plot_confusion

        plot_confusion(
            scores,
            args.plot,
            title=f"{Path(args.model_dir).name} on {Path(source).name}: "
            f"accuracy {scores.accuracy:.1%}, macro-F1 {scores.macro_f1:.3f}",
        )
        print(f"wrote {args.plot}")
