"""`evaluate --text` of a language model: its loss and perplexity per token and per character, the
text read as one stream in sliding windows or each line on its own."""

from __future__ import annotations

import argparse

from ..data.text import DataError
from .common import UserError, read_text


def evaluate_perplexity(args: argparse.Namespace, pipeline) -> None:
    """A language model's loss on a text: per token and per character, the text read as one
    stream in sliding windows, or with --per-line each line on its own."""
    from ..evaluation.scoring import TextScore, model_nll, score_text

    cfg = pipeline.model.config
    tok = pipeline.target_tokenizer
    if args.per_line:
        if args.window or args.stride:
            raise UserError(
                "--window and --stride are for the stream: leave them out with --per-line"
            )
        lines = [line for line in read_text(args.text, "--text") if line.strip()]
        if not lines:
            raise UserError(
                f"--text {args.text} has no non-empty line: give text to measure perplexity on"
            )
        nll, n = model_nll(
            pipeline.model, [[cfg.bos_id] + tok.encode(line) + [cfg.eos_id] for line in lines]
        )
        score = TextScore(nll, n, sum(len(line) + 1 for line in lines))
        how = f"{len(lines):,} lines each on its own, </s> scored as the line break"
    else:
        window = args.window or cfg.max_positions
        if window > cfg.max_positions:
            raise UserError(
                f"--window {window} is longer than the model's max_positions={cfg.max_positions}: "
                f"give --window {cfg.max_positions} or less"
            )
        stride = args.stride or window
        if stride > window:
            raise UserError(
                f"--stride {stride} is longer than the window ({window}): give at most {window}"
            )
        try:
            score = score_text(pipeline.model, args.text, tok, args.documents, window, stride)
        except DataError as e:
            raise UserError(str(e)) from None
        context = (
            "" if stride == window else f", each scoring its last {stride} with the rest as context"
        )
        how = (
            f"one stream (documents: {args.documents}, each <s> ... </s>), windows of {window} "
            f"tokens moved by {stride}{context}"
        )
    print(
        f"perplexity {score.perplexity:.3f} on {args.text}: {score.nll_per_token:.4f} nats per "
        f"token over {score.tokens:,} tokens; {score.nll_per_char:.4f} nats = "
        f"{score.bits_per_char:.4f} bits per character over {score.chars:,} characters ({how})"
    )
