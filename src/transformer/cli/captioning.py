"""`evaluate --images` for a captioner (imported by cli/evaluation.py; is_captioner_dir is
re-exported from loading.py for it)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import (
    UserError,
    check_output,
    decode_overrides,
    write_text,
)
from .loading import captioner, is_captioner_dir

__all__ = ["SEARCH", "evaluate_captions", "is_captioner_dir"]

SEARCH = ("beam_size", "length_penalty", "length_penalty_kind")
"""The decoding settings evaluate takes."""


def evaluate_captions(args: argparse.Namespace) -> None:
    """`evaluate --images SPLIT` for a captioner: exact match and chrF of its captions against the
    images' label names (decode.json's search, or --beam-size); --output writes the captions."""
    from ..evaluation.captions import score_captions

    given = [
        flag
        for flag, value in (
            ("--text", args.text), ("--src", args.src), ("--ref", args.ref), ("--tsv", args.tsv),
            ("--pairs", args.pairs), ("--squad", args.squad), ("--audio", args.audio),
            ("--detection", args.detection), ("--plot", args.plot),
        )
        if value
    ]  # fmt: skip
    if given:
        raise UserError(
            f"give --images (a captioner's exact match and chrF) alone, without {given[0]}"
        )
    if not Path(args.images).exists():
        raise UserError(
            f"--images {args.images} not found: give a prepared split (.safetensors) or a folder "
            "of class folders"
        )
    if args.output:
        check_output(args.output)
    pipeline = captioner(args, "evaluate")
    scores, captions, _ = score_captions(pipeline, args.images, **decode_overrides(args, SEARCH))
    if args.output:
        write_text(args.output, captions)
    hits = round(scores.exact_match * scores.n)
    print(
        f"exact match {scores.exact_match:.2%} ({hits:,} of {scores.n:,} images of {args.images})"
    )
    print(scores.chrf_line)
