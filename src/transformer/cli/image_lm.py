"""`transformer evaluate MODEL --images SPLIT` for an image generator: bits per dimension, and with
--classifier, how many of its class-conditional samples a classifier recognises."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..config import IMAGE_SAMPLING_SETTINGS
from .common import UserError, check_picture, decode_overrides, load_pipeline


def evaluate_image_lm(args: argparse.Namespace) -> None:
    """Bits/dim on --images; with --classifier, sample recognition (and --plot its confusion)."""
    from ..data.images import ImageError
    from ..decoding.inputs import PipelineError
    from ..decoding.pipeline import Pipeline
    from ..evaluation.image_lm import score_image_lm, score_samples
    from ..evaluation.metrics import classification_scores

    for flag, value in (("--text", args.text), ("--src", args.src), ("--tsv", args.tsv)):
        if value:
            raise UserError(f"give --images (an image generator's bits/dim) without {flag}")
    if args.plot:
        if not args.classifier:
            raise UserError("--plot draws the samples' confusion matrix: it needs --classifier")
        check_picture("--plot", args.plot, "the picture")
    pipeline = load_pipeline(args, "evaluate")
    try:
        scores = score_image_lm(pipeline, args.images, limit=args.limit or 0)
    except ImageError as e:
        raise UserError(str(e)) from None
    n = int(scores["images"])
    levels = pipeline.pixels.levels
    line = (
        f"bits/dim {scores['bits_per_dim']:.4f} ({levels} levels a channel, given each image's "
        f"condition)  8-bit bound {scores['bits_per_dim_8bit']:.4f}"
    )
    if "bits_per_dim_unconditional" in scores:
        line += f"  unconditional {scores['bits_per_dim_unconditional']:.4f}"
    print(f"{line}  ({n:,} images of {args.images})")
    if not args.classifier:
        return
    try:
        classifier = Pipeline.load(args.classifier)
    except (OSError, ValueError) as e:
        raise UserError(f"--classifier {args.classifier}: {e}") from None
    if not pipeline.pixels.labels:
        raise UserError("--classifier scores class-conditional samples: this model has no labels")
    try:
        share, truth, predicted = score_samples(
            pipeline,
            classifier,
            args.samples,
            seed=args.seed or 0,
            **decode_overrides(args, IMAGE_SAMPLING_SETTINGS),
        )
    except (ValueError, PipelineError) as e:
        raise UserError(str(e)) from None
    labels = list(pipeline.pixels.labels)
    result = classification_scores(predicted, truth, labels)
    print(
        f"samples recognised {share:.2%}  ({len(truth):,} samples, {args.samples} a label, "
        f"named by {args.classifier})"
    )
    width = max(map(len, labels))
    for row in result.per_class():
        print(f"  {row['label']:<{width}}  {row['recall']:7.2%}")
    if args.plot:
        from ..viz.confusion import plot_confusion

        plot_confusion(
            result,
            args.plot,
            title=f"samples of {Path(args.model_dir).name} named by "
            f"{Path(args.classifier).name}: {share:.1%}",
        )
        print(f"wrote {args.plot}")
