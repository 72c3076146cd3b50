"""`transformer tokenize`: show how a tokenizer cuts text into tokens, or compare the four kinds
(word, char, BPE, Unigram) on a config's data. The handler is `tokenize`; its flags are derived
from its signature (cli.args)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Annotated, Literal

from ..config import Bounds
from .args import Arg, add_arguments, call
from .common import UserError


def tokenize(
    tokenizer: Annotated[
        str | None,
        Arg(
            "a model directory or a tokenizer.json",
            metavar="MODEL_DIR|TOKENIZER_JSON",
            positional=True,
        ),
    ] = None,
    text: Annotated[list[str] | None, Arg("text to cut into tokens (repeatable)")] = None,
    side: Annotated[
        Literal["source", "target"],
        Arg("which tokenizer of a model directory with separate vocabularies (default source)"),
    ] = "source",
    compare: Annotated[
        str | None,
        Arg("train the four kinds on this config's data and compare them", metavar="CONFIG"),
    ] = None,
    sample: Annotated[
        int,
        Arg(
            "with --compare: training examples to train each on (default 50000; 0: all)",
            Bounds(ge=0),
            "a number of training examples, or 0 for all",
        ),
    ] = 50000,
    overrides: Annotated[
        list[str] | None,
        Arg("with --compare: override a config value", metavar="SECTION.KEY=VALUE", flag="--set"),
    ] = None,
) -> None:
    """Print each text's tokens and ids, or (--compare) a table of the four tokenizer kinds."""
    from ..data.tokenizer import UNK_ID, Tokenizer
    from ..model_dir import load_tokenizers

    if compare:
        if tokenizer or text:
            raise UserError(
                "--compare CONFIG trains its own tokenizers: give no tokenizer and no --text with "
                "it"
            )
        return compare_tokenizers(compare, sample, overrides or [])
    if not tokenizer or not text:
        raise UserError(
            "give a model directory or a tokenizer.json and --text TEXT (or --compare CONFIG)"
        )
    path = Path(tokenizer)
    if path.is_dir():
        source, target = load_tokenizers(path)
        tok = source if side == "source" else target
    else:
        tok = Tokenizer.load(path)
    for line in text:
        ids = tok.encode(line)
        unk = sum(i == UNK_ID for i in ids)
        print(
            f"{line}\n{len(ids)} token(s), {unk} <unk> ({tok.kind}, vocabulary {tok.vocab_size:,})"
        )
        for i in ids:
            shown = (
                ""
                if tok.kind in ("word", "char")
                else f"  {tok.tokenizer.decode([i], skip_special_tokens=False)!r}"
            )
            print(f"{i:>8}  {tok.id_to_token(i)}{shown}")


def compare_tokenizers(config_path: str, sample: int, overrides: list[str]) -> None:
    """A table of tokens per sentence and <unk> rates of the four tokenizer kinds on a config's
    data."""
    from ..config import load_config
    from ..training.tokenizing import compare_tokenizers as compare

    config = load_config(config_path, overrides)
    rows = compare(config, sample, say=lambda m: print(m, file=sys.stderr))
    sides = [side for side in ("source", "target") if f"{side}_tokens" in rows[0]]
    print(
        "| tokenizer | vocabulary | "
        + " | ".join(f"{s} tokens/sentence | {s} <unk>" for s in sides)
        + " |"
    )
    print("|---|---:|" + "---:|---:|" * len(sides))
    for r in rows:
        print(
            f"| {r['tokenizer']} | {r['vocab_size']:,} | "
            + " | ".join(f"{r[f'{s}_tokens']:.1f} | {r[f'{s}_unk']:.2%}" for s in sides)
            + " |"
        )


def register(sub: argparse._SubParsersAction) -> None:
    """`tokenize`."""
    p = sub.add_parser(
        "tokenize",
        help="show the tokens and ids of a text, or compare word/char/BPE/Unigram on a config",
    )
    add_arguments(p, tokenize)
    p.set_defaults(func=lambda args: call(tokenize, args))
