"""`transformer embed` and `transformer evaluate --images` for a text-image dual encoder (CLIP,
trained with objective = "contrastive"): embeddings, zero-shot classification and retrieval; the
parser beside the handler."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .common import UserError, add_device_args, add_precision_arg, load_pipeline, note

PLOTTED_NAMES = 30
"""--plot draws at most this many names (a confusion matrix of 1,000 names is not a picture):
those most often confused, as gold or as prediction."""


def is_contrastive(model_dir: str) -> bool:
    """Whether a model directory's config.json describes a dual encoder (False when unreadable:
    the other commands then say what is wrong with it)."""
    from ..model.io import ModelFileError
    from ..model_dir import load_config

    try:
        return load_config(model_dir).contrastive is not None
    except ModelFileError:
        return False


def _dual_encoder(args: argparse.Namespace, command: str):
    pipeline = load_pipeline(args, command)
    if pipeline.model.config.contrastive is None:
        raise UserError(
            f"{args.model_dir} is not a dual encoder: {command} needs a model trained with "
            'objective = "contrastive" ([model.contrastive])'
        )
    return pipeline


def cmd_embed(args: argparse.Namespace) -> None:
    """One JSON line per input, texts first: {"text": T, "embedding": [...]} or {"image": F,
    "embedding": [...]}, the unit vector the dual encoder gives it."""
    texts, images = args.text or [], args.image or []
    if not texts and not images:
        raise UserError("give --text TEXT (one or more) or --image FILE (one or more) to embed")
    for image in images:
        if not Path(image).is_file():
            raise UserError(f"--image {image} not found: give image files (PNG, JPEG, ...)")
    pipeline = _dual_encoder(args, "embed")
    out = []
    if texts:
        out += [("text", t, v) for t, v in zip(texts, pipeline.embed_texts(texts), strict=True)]
    if images:
        out += [("image", f, v) for f, v in zip(images, pipeline.embed_images(images), strict=True)]
    for kind, source, vector in out:
        values = [round(x, 6) for x in vector.tolist()]
        print(json.dumps({kind: source, "embedding": values}, ensure_ascii=False))


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
    pipeline = _dual_encoder(args, "evaluate")
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


def register(sub: argparse._SubParsersAction) -> None:
    """`embed`."""
    p = sub.add_parser(
        "embed",
        help="a text-image dual encoder's embeddings of texts or images, one JSON line each",
    )
    p.add_argument("model_dir")
    p.add_argument("--text", action="append", help="a text to embed (repeat the flag for several)")
    p.add_argument(
        "--image",
        nargs="+",
        action="extend",
        help="image files to embed (square; fitted to the model's channels and size)",
    )
    add_device_args(p)
    add_precision_arg(p)
    p.set_defaults(func=cmd_embed)
