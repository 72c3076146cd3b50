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
    given_n, given_beam = decode.get("n_best"), decode.get("beam_size")
    if given_n is not None and given_beam is not None and given_n > given_beam:
        raise UserError(
            f"--n-best {given_n} is more than --beam {given_beam}: a beam returns at most as many "
            f"hypotheses as it keeps; give --beam {given_n} or more"
        )
    pipeline = load_pipeline(run, "translate")
    pipeline.expect("translate")  # checked before reading any input: stdin may be empty or slow
    n_best = decode.get("n_best", pipeline.decode.n_best)
    beam = decode.get("beam_size", pipeline.decode.beam_size)
    # both flags together were checked above: here one of the two is the model's default
    if n_best > beam:
        if "n_best" in decode:
            raise UserError(
                f"--n-best {n_best} is more than the model's beam size {beam} (decode.json): "
                f"give --beam {n_best} or more"
            )
        raise UserError(
            f"--beam {beam} is less than the model's n_best={n_best} (decode.json): give --n-best "
            f"{beam}"
        )
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


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer translate`."""
    command(
        sub, "translate", translate, help="translate lines with an encoder-decoder model directory"
    )
