"""The synthetic copy task: aligned files of random token sequences where the target is the source.

A first end-to-end check of a translation setup: a working encoder-decoder learns it to 100%
exact match quickly; a bug in masking, shifting or decoding shows up as less.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from ...files import atomic_write_text

SYMBOLS = tuple("abcdefghijklmnopqrstuvwxyz")


def copy_lines(
    n: int, rng: random.Random, n_symbols: int = 20, min_len: int = 3, max_len: int = 12
) -> list[str]:
    """n lines of min_len..max_len symbols drawn uniformly from the first n_symbols letters,
    space-separated."""
    symbols = SYMBOLS[:n_symbols]
    return [
        " ".join(rng.choice(symbols) for _ in range(rng.randint(min_len, max_len)))
        for _ in range(n)
    ]


def write_copy_task(
    out: str | os.PathLike,
    n_train: int = 20000,
    n_valid: int = 200,
    n_test: int = 200,
    n_symbols: int = 20,
    min_len: int = 3,
    max_len: int = 12,
    seed: int = 1,
) -> dict[str, Path]:
    """Write {train,valid,test}.{src,tgt} into `out` (target = source); test lines never occur in
    train."""
    if not 1 <= n_symbols <= len(SYMBOLS):
        raise ValueError(f"n_symbols={n_symbols} is not valid: choose 1 to {len(SYMBOLS)}")
    if not 1 <= min_len <= max_len:
        raise ValueError(f"min_len={min_len}, max_len={max_len}: need 1 <= min_len <= max_len")
    if n_train < 1 or n_valid < 0 or n_test < 0:
        raise ValueError(
            f"n_train={n_train}, n_valid={n_valid}, n_test={n_test}: need n_train >= 1 and the "
            "others >= 0"
        )
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file: give a directory for the copy task's files")
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    held_out = copy_lines(n_valid + n_test, rng, n_symbols, min_len, max_len)
    unseen = set(held_out)
    train = [
        line
        for line in copy_lines(n_train * 2, rng, n_symbols, min_len, max_len)
        if line not in unseen
    ][:n_train]
    files = {}
    for split, lines in (
        ("train", train),
        ("valid", held_out[:n_valid]),
        ("test", held_out[n_valid:]),
    ):
        text = "".join(line + "\n" for line in lines)
        for side in ("src", "tgt"):
            files[f"{split}.{side}"] = out / f"{split}.{side}"
            atomic_write_text(out / f"{split}.{side}", text)
    return files
