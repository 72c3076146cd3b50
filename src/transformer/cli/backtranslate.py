"""`transformer backtranslate`: synthetic pairs from monolingual target text with a reverse model
(transformer.workflows.backtranslate)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..config import (
    SAMPLING_SETTINGS,
    TRANSLATE_SETTINGS,
)
from ..config.decode import REPETITION_SETTINGS
from .common import (
    POSITIVE,
    UserError,
    add_batch_tokens_arg,
    add_decode_args,
    add_device_args,
    add_flag,
    add_precision_arg,
    decode_overrides,
    load_pipeline,
    note,
)
from .lines import read_lines

TRANSLATE = TRANSLATE_SETTINGS
SAMPLING = tuple(name for name in SAMPLING_SETTINGS if name not in REPETITION_SETTINGS)


BACKTRANSLATE = (
    *(name for name in TRANSLATE if name != "n_best"),
    *(name for name in SAMPLING if name != "max_new_tokens"),
)
"""backtranslate's decoding settings: one output per line, by search or sampling."""


def cmd_backtranslate(args: argparse.Namespace) -> None:
    """Translate monolingual target-language lines with a reverse model into aligned synthetic
    pairs (see transformer.workflows.backtranslate)."""
    from ..workflows.backtranslate import backtranslate, check_tag, search_kind

    decode = decode_overrides(args, BACKTRANSLATE)
    check_tag(args.tag)
    search = search_kind({"beam_size": 1, **decode})
    for flag, path in (("--out-src", args.out_src), ("--out-tgt", args.out_tgt)):
        if Path(path).is_dir() or not Path(path).resolve().parent.is_dir():
            raise UserError(f"{flag} {path}: give a file name in a directory that exists")
    if Path(args.out_src).resolve() == Path(args.out_tgt).resolve():
        raise UserError("--out-src and --out-tgt are the same file: give two file names")
    lines = read_lines(args.input, "--input")[: args.limit]
    if not any(line.strip() for line in lines):
        raise UserError(f"--input {args.input} has no text: give a file of sentences, one per line")
    from ..decoding.pipeline import truncation_note  # torch: checked all that needs no model
    from ..model.transformer import EncoderDecoder

    pipeline = load_pipeline(args, "backtranslate")
    if not isinstance(pipeline.model, EncoderDecoder):
        raise UserError(
            "this is a language model: back-translation needs an encoder-decoder trained from "
            "the target language to the source (e.g. configs/en-es.toml)"
        )

    def progress(report) -> None:
        rate = report.lines / max(report.seconds, 1e-9)
        left = (len(lines) - report.lines) / max(rate, 1e-9)
        when = f"about {left / 60:.0f} min left" if left >= 60 else f"{left:.0f} s left"
        note(
            "backtranslate", f"{report.lines:,} of {len(lines):,} lines, {rate:.1f} lines/s, {when}"
        )

    report = backtranslate(
        pipeline,
        lines,
        args.out_src,
        args.out_tgt,
        tag=args.tag,
        batch_tokens=args.batch_tokens,
        seed=args.seed,
        on_progress=progress,
        **decode,
    )
    if report.truncated:
        note(
            "backtranslate",
            truncation_note(report.truncated, report.lines, pipeline.max_source_tokens),
        )
    tagged = f", sources tagged {args.tag!r}" if args.tag else ""
    print(
        f"wrote {args.out_src} and {args.out_tgt}: {report.lines:,} pairs ({search}{tagged}, "
        f"{report.lines / max(report.seconds, 1e-9):.1f} lines/s); {report.blank:,} blank input "
        f"lines and {report.empty:,} empty translations written as pairs with an empty side, "
        "which training drops"
    )


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer backtranslate`."""
    p = sub.add_parser(
        "backtranslate",
        help="translate monolingual target-language text with a reverse model into aligned "
        "synthetic pairs (back-translation)",
    )
    p.add_argument("model_dir", help="a reverse model: English -> Spanish for Spanish -> English")
    p.add_argument("--input", required=True, help="file of target-language lines (e.g. English)")
    p.add_argument("--out-src", required=True, help="file for the synthetic sources (Spanish)")
    p.add_argument("--out-tgt", required=True, help="file for the input lines, unchanged")
    p.add_argument(
        "--tag",
        help="put this word and a space before every synthetic source, e.g. '<bt>' (tagged "
        "back-translation, Caswell et al. 2019)",
    )
    add_decode_args(
        p,
        BACKTRANSLATE,
        notes={
            "beam_size": "default 1, greedy, for speed; not the model's decode.json",
            **{
                name: "giving it samples instead of searching: Edunov et al. 2018"
                for name in ("temperature", "top_k", "top_p")
            },
        },
    )
    add_batch_tokens_arg(p)
    add_flag(
        p,
        "--limit",
        type=int,
        bounds=POSITIVE,
        give="a positive number of lines",
        help="translate only the first N lines of --input",
    )
    p.add_argument("--seed", type=int, default=1, help="random seed of sampling (default 1)")
    add_device_args(p)
    add_precision_arg(p)
    p.set_defaults(func=cmd_backtranslate)
