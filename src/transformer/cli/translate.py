"""`transformer translate`: lines through an encoder-decoder model directory. The decoding flags
are derived from DecodeConfig's settings (config's TRANSLATE_SETTINGS: written once, it makes the
flags and picks the overrides)."""

from __future__ import annotations

import argparse
import sys
from typing import Annotated

from ..config import (
    TRANSLATE_SETTINGS,
    DecodeConfig,
    MoreThanTheBeam,
)
from ..data.lines import format_lines, note, read_lines, stream_lines, write_text
from ..files import check_output
from .args import Arg, Settings, command
from .common import BATCH_TOKENS, ModelRun, UserError, load_pipeline

INPUT = Annotated[str | None, Arg("file of source lines (default: standard input)")]
OUTPUT = Annotated[str | None, Arg("file for the translations (default: standard output)")]
PREFIX = Annotated[
    str | None,
    Arg(
        "put this before every input line: a text-to-text model's task, e.g. 'translate "
        "Spanish to English: '"
    ),
]


def translate(
    run: ModelRun,
    decode: Annotated[dict, Settings(DecodeConfig, TRANSLATE_SETTINGS)] = None,
    input: INPUT = None,
    output: OUTPUT = None,
    batch_tokens: BATCH_TOKENS = 4000,
    prefix: PREFIX = None,
) -> None:
    """Translate lines (stdin or --input) into detokenised lines (stdout or --output), in input
    order.

    A file is translated in length-sorted batches. Standard input is translated as it arrives:
    what is waiting is batched, and each line typed at a terminal is answered at once. Lines
    longer than the model takes are truncated, and a note on stderr says which.
    """
    from ..decoding.inputs import truncation_note

    if output not in (None, "-"):
        check_output(output)
    decode = decode or {}
    pipeline = load_pipeline(run, "translate")
    pipeline.expect("translate")  # checked before reading any input: stdin may be empty or slow
    try:
        settings = pipeline.settings(**decode)
    except MoreThanTheBeam as e:
        raise UserError(more_than_the_beam(e, decode)) from None
    n_best = settings.n_best
    cut: list[int] = []
    done = 0

    def translate_lines(lines: list[str]) -> list[str]:
        nonlocal done
        first = done
        if prefix:  # a text-to-text model's task; blank lines stay blank
            lines = [prefix + line if line.strip() else line for line in lines]
        outputs = pipeline.translate(
            lines,
            batch_tokens=batch_tokens,
            **decode,
            on_truncate=lambda numbers: cut.extend(first + n for n in numbers),
        )
        done += len(lines)
        # an empty line has no hypotheses: n_best empty ones keep n_best lines per line
        if n_best > 1:
            return [
                f"{first + i}\t{rank}\t{h}"
                for i, hyps in enumerate(outputs)
                for rank, h in enumerate(hyps or [""] * n_best, 1)
            ]
        return outputs

    if input not in (None, "-"):
        write_text(output, translate_lines(read_lines(input, "--input")))
    elif output not in (None, "-"):
        write_text(output, [out for chunk in stream_lines() for out in translate_lines(chunk)])
    else:
        for chunk in stream_lines():
            sys.stdout.write(format_lines(translate_lines(chunk)))
            sys.stdout.flush()
    if cut:
        note("translate", truncation_note(cut, done, pipeline.max_source_tokens))


def more_than_the_beam(e: MoreThanTheBeam, given: dict) -> str:
    """DecodeConfig's n_best rule in the words of translate's flags: which of the two was given,
    and which is the model's (decode.json)."""
    if "n_best" in given and "beam_size" in given:
        return (
            f"--n-best {e.n_best} is more than --beam {e.beam_size}: a beam returns at most as "
            f"many hypotheses as it keeps; give --beam {e.n_best} or more"
        )
    if "n_best" in given:
        return (
            f"--n-best {e.n_best} is more than the model's beam size {e.beam_size} (decode.json): "
            f"give --beam {e.n_best} or more"
        )
    return (
        f"--beam {e.beam_size} is less than the model's n_best={e.n_best} (decode.json): give "
        f"--n-best {e.beam_size}"
    )


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer translate`."""
    command(
        sub, "translate", translate, help="translate lines with an encoder-decoder model directory"
    )
