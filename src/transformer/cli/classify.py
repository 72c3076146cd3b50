"""`transformer classify`: labels of lines or images with a classifier model directory. The
handler is `classify`; its parser is derived from its signature (cli.args)."""

from __future__ import annotations

import argparse
from typing import Annotated

from ..data.lines import note, read_text, write_text
from ..files import check_output
from .args import Arg, command
from .common import AT_LEAST_0, ModelRun, UserError, load_pipeline
from .loading import (
    image_files,
)


def classify_lines(pipeline, lines: list[str], top_k: int, command: str) -> list:
    """Pipeline.classify over the non-blank lines (a blank line gets None), truncation noted on
    stderr."""
    from ..decoding.inputs import truncation_note

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


def classify(
    run: ModelRun,
    input: Annotated[
        list[str] | None,
        Arg(
            "file of texts, one per line (default: standard input); for an image classifier, "
            "image files or folders of them",
            several=True,
        ),
    ] = None,
    output: Annotated[
        str | None,
        Arg(
            "file for label<TAB>probability lines (images: file<TAB>label<TAB>probability; "
            "default: standard output)"
        ),
    ] = None,
    top_k: Annotated[
        int,
        Arg(
            "label/probability pairs per line, most likely first (default 1; 0 = all labels)",
            AT_LEAST_0,
            "a number of labels (0 = all)",
        ),
    ] = 1,
) -> None:
    """Label each line of text (stdin or --input): label<TAB>probability per line, the top K pairs
    with --top-k K."""
    if output not in (None, "-"):
        check_output(output)
    pipeline = load_pipeline(run, "classify")
    pairs = lambda r: "\t".join(f"{label}\t{p:.4f}" for label, p in r)  # noqa: E731
    if pipeline.model.config.vision is not None:
        if not input:
            raise UserError("give the images to classify: --input FILE... or a folder of them")
        files = image_files(input)
        results = pipeline.classify_images(files, top_k=top_k)
        write_text(output, [f"{file}\t{pairs(r)}" for file, r in zip(files, results, strict=True)])
        return
    if input and len(input) > 1:
        raise UserError(f"--input takes one text file for a text classifier, not {len(input)}")
    lines = read_text(input[0] if input else None, "--input")
    results = classify_lines(pipeline, lines, top_k, "classify")
    write_text(output, ["" if r is None else pairs(r) for r in results])


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer classify`."""
    command(
        sub,
        "classify",
        classify,
        help="label lines of text with an encoder classifier's model directory",
    )
