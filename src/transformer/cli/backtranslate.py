"""`transformer backtranslate`: synthetic pairs from monolingual target text with a reverse model
(transformer.workflows.backtranslate)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Annotated

from ..config import (
    SAMPLING_SETTINGS,
    TRANSLATE_SETTINGS,
    DecodeConfig,
)
from ..config.decode import REPETITION_SETTINGS
from ..data.lines import note, read_lines
from .args import Arg, Settings, command
from .common import (
    BATCH_TOKENS,
    DEVICE,
    POSITIVE,
    PRECISION,
    THREADS,
    ModelRun,
    UserError,
    load_pipeline,
)

SAMPLING = tuple(name for name in SAMPLING_SETTINGS if name not in REPETITION_SETTINGS)


BACKTRANSLATE = (
    *(name for name in TRANSLATE_SETTINGS if name != "n_best"),
    *(name for name in SAMPLING if name != "max_new_tokens"),
)
"""backtranslate's decoding settings: one output per line, by search or sampling."""
NOTES = {
    "beam_size": "default 1, greedy, for speed; not the model's decode.json",
    **{
        name: "giving it samples instead of searching: Edunov et al. 2018"
        for name in ("temperature", "top_k", "top_p")
    },
}
"""What backtranslate's decoding flags' help adds to each setting's doc."""


MODEL_DIR = Annotated[
    str, Arg("a reverse model: English -> Spanish for Spanish -> English", positional=True)
]
INPUT = Annotated[str, Arg("file of target-language lines (e.g. English)")]
TAG = Annotated[
    str | None,
    Arg(
        "put this word and a space before every synthetic source, e.g. '<bt>' (tagged "
        "back-translation, Caswell et al. 2019)"
    ),
]
LIMIT = Annotated[
    int | None,
    Arg("translate only the first N lines of --input", POSITIVE, "a positive number of lines"),
]


def backtranslate(
    model_dir: MODEL_DIR,
    input: INPUT,
    out_src: Annotated[str, Arg("file for the synthetic sources (Spanish)")],
    out_tgt: Annotated[str, Arg("file for the input lines, unchanged")],
    tag: TAG = None,
    decode: Annotated[dict, Settings(DecodeConfig, BACKTRANSLATE, notes=NOTES)] = None,
    batch_tokens: BATCH_TOKENS = 4000,
    limit: LIMIT = None,
    seed: Annotated[int, Arg("random seed of sampling (default 1)")] = 1,
    device: DEVICE = "auto",
    threads: THREADS = None,
    precision: PRECISION = None,
) -> None:
    """Translate monolingual target-language lines with a reverse model into aligned synthetic
    pairs (see transformer.workflows.backtranslate)."""
    from ..workflows.backtranslate import backtranslate as write_pairs
    from ..workflows.backtranslate import check_tag, search_kind

    decode = decode or {}
    check_tag(tag)
    search = search_kind({"beam_size": 1, **decode})
    for flag, path in (("--out-src", out_src), ("--out-tgt", out_tgt)):
        if Path(path).is_dir() or not Path(path).resolve().parent.is_dir():
            raise UserError(f"{flag} {path}: give a file name in a directory that exists")
    if Path(out_src).resolve() == Path(out_tgt).resolve():
        raise UserError("--out-src and --out-tgt are the same file: give two file names")
    lines = read_lines(input, "--input")[:limit]
    if not any(line.strip() for line in lines):
        raise UserError(f"--input {input} has no text: give a file of sentences, one per line")
    from ..decoding.inputs import truncation_note  # torch: checked all that needs no model
    from ..model.transformer import EncoderDecoder

    pipeline = load_pipeline(ModelRun(model_dir, device, threads, precision), "backtranslate")
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

    report = write_pairs(
        pipeline,
        lines,
        out_src,
        out_tgt,
        tag=tag,
        batch_tokens=batch_tokens,
        seed=seed,
        on_progress=progress,
        **decode,
    )
    if report.truncated:
        note(
            "backtranslate",
            truncation_note(report.truncated, report.lines, pipeline.max_source_tokens),
        )
    tagged = f", sources tagged {tag!r}" if tag else ""
    print(
        f"wrote {out_src} and {out_tgt}: {report.lines:,} pairs ({search}{tagged}, "
        f"{report.lines / max(report.seconds, 1e-9):.1f} lines/s); {report.blank:,} blank input "
        f"lines and {report.empty:,} empty translations written as pairs with an empty side, "
        "which training drops"
    )


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer backtranslate`."""
    command(
        sub,
        "backtranslate",
        backtranslate,
        help="translate monolingual target-language text with a reverse model into aligned "
        "synthetic pairs (back-translation)",
    )
