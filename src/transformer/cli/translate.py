"""`transformer translate`: lines through an encoder-decoder model directory. The decoding flags
are derived from DecodeConfig's settings (TRANSLATE: written once, it makes the flags and picks
the overrides)."""

from __future__ import annotations

import argparse
import sys

from ..config import (
    TRANSLATE_SETTINGS,
)
from .common import (
    UserError,
    add_batch_tokens_arg,
    add_decode_args,
    add_device_args,
    add_precision_arg,
    check_output,
    decode_overrides,
    load_pipeline,
    note,
    write_text,
)
from .lines import format_lines, read_lines, stream_lines

TRANSLATE = TRANSLATE_SETTINGS


def cmd_translate(args: argparse.Namespace) -> None:
    """Translate lines (stdin or --input) into detokenised lines (stdout or --output), in input
    order.

    A file is translated in length-sorted batches. Standard input is translated as it arrives:
    what is waiting is batched, and each line typed at a terminal is answered at once. Lines
    longer than the model takes are truncated, and a note on stderr says which.
    """
    from ..decoding.pipeline import truncation_note
    from ..model.transformer import EncoderDecoder

    if args.output not in (None, "-"):
        check_output(args.output)
    if args.n_best is not None and args.beam_size is not None and args.n_best > args.beam_size:
        raise UserError(
            f"--n-best {args.n_best} is more than --beam {args.beam_size}: a beam returns at most "
            f"as many hypotheses as it keeps; give --beam {args.n_best} or more"
        )
    pipeline = load_pipeline(args, "translate")
    # checked before reading any input: stdin may be empty or slow
    if not isinstance(pipeline.model, EncoderDecoder):
        raise UserError("this is a language model: use generate, not translate")
    decode = decode_overrides(args, TRANSLATE)
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

    def translate(lines: list[str]) -> list[str]:
        nonlocal done
        first = done
        if args.prefix:  # a text-to-text model's task; blank lines stay blank
            lines = [args.prefix + line if line.strip() else line for line in lines]
        outputs = pipeline.translate(
            lines,
            batch_tokens=args.batch_tokens,
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

    if args.input not in (None, "-"):
        write_text(args.output, translate(read_lines(args.input, "--input")))
    elif args.output not in (None, "-"):
        write_text(args.output, [out for chunk in stream_lines() for out in translate(chunk)])
    else:
        for chunk in stream_lines():
            sys.stdout.write(format_lines(translate(chunk)))
            sys.stdout.flush()
    if cut:
        note("translate", truncation_note(cut, done, pipeline.max_source_tokens))


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer translate`."""
    p = sub.add_parser("translate", help="translate lines with an encoder-decoder model directory")
    p.add_argument("model_dir")
    add_decode_args(p, TRANSLATE)
    p.add_argument("--input", help="file of source lines (default: standard input)")
    p.add_argument("--output", help="file for the translations (default: standard output)")
    add_batch_tokens_arg(p)
    p.add_argument(
        "--prefix",
        help="put this before every input line: a text-to-text model's task, e.g. "
        "'translate Spanish to English: '",
    )
    add_device_args(p)
    add_precision_arg(p)
    p.set_defaults(func=cmd_translate)
