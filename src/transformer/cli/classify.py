"""`transformer classify`: labels of lines or images with a classifier model directory."""

from __future__ import annotations

import argparse

from .common import (
    AT_LEAST_0,
    UserError,
    add_device_args,
    add_flag,
    add_precision_arg,
    check_output,
    load_pipeline,
    note,
    read_text,
    write_text,
)
from .loading import (
    image_files,
)


def classify_lines(pipeline, lines: list[str], top_k: int, command: str) -> list:
    """Pipeline.classify over the non-blank lines (a blank line gets None), truncation noted on
    stderr."""
    from ..decoding.pipeline import truncation_note

    kept = [i for i, line in enumerate(lines) if line.strip()]
    cut: list[int] = []
    results = pipeline.classify([lines[i] for i in kept], top_k=top_k, on_truncate=cut.extend)
    if cut:
        limit = pipeline.model.config.max_positions - 2
        note(command, truncation_note([kept[n - 1] + 1 for n in cut], len(lines), limit))
    out: list = [None] * len(lines)
    for i, result in zip(kept, results, strict=True):
        out[i] = result
    return out


def cmd_classify(args: argparse.Namespace) -> None:
    """Label each line of text (stdin or --input): label<TAB>probability per line, the top K pairs
    with --top-k K."""
    if args.output not in (None, "-"):
        check_output(args.output)
    pipeline = load_pipeline(args, "classify")
    pairs = lambda r: "\t".join(f"{label}\t{p:.4f}" for label, p in r)  # noqa: E731
    if pipeline.model.config.vision is not None:
        if not args.input:
            raise UserError("give the images to classify: --input FILE... or a folder of them")
        files = image_files(args.input)
        results = pipeline.classify_images(files, top_k=args.top_k)
        write_text(
            args.output, [f"{file}\t{pairs(r)}" for file, r in zip(files, results, strict=True)]
        )
        return
    if args.input and len(args.input) > 1:
        raise UserError(f"--input takes one text file for a text classifier, not {len(args.input)}")
    lines = read_text(args.input[0] if args.input else None, "--input")
    results = classify_lines(pipeline, lines, args.top_k, "classify")
    write_text(args.output, ["" if r is None else pairs(r) for r in results])


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer classify`."""
    p = sub.add_parser(
        "classify", help="label lines of text with an encoder classifier's model directory"
    )
    p.add_argument("model_dir")
    p.add_argument(
        "--input",
        nargs="+",
        help="file of texts, one per line (default: standard input); for an "
        "image classifier, image files or folders of them",
    )
    p.add_argument(
        "--output",
        help="file for label<TAB>probability lines (images: file<TAB>label<TAB>"
        "probability; default: standard output)",
    )
    add_flag(
        p,
        "--top-k",
        dest="top_k",
        type=int,
        default=1,
        bounds=AT_LEAST_0,
        give="a number of labels (0 = all)",
        help="label/probability pairs per line, most likely first (default 1; 0 = all labels)",
    )
    add_device_args(p)
    add_precision_arg(p)
    p.set_defaults(func=cmd_classify)
