"""A speech test set scored: a folder of WAV files with their transcripts -> each file's
transcript by the model, its word errors, and the corpus word error rate (evaluation/overlap.py).

A test folder holds WAV files and `transcripts.tsv`: one `file.wav<TAB>transcript` line per clip,
the file named relative to the folder (what `transformer data speech` writes for each split).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ..decoding.ctc import ctc_transcribe
from ..decoding.greedy import greedy_search
from .overlap import wer, word_errors

TRANSCRIPTS_FILE = "transcripts.tsv"


class TranscriptsError(ValueError):
    """A test folder that cannot be read; the message says what is wrong and how to fix it."""


@dataclass
class Clip:
    """One clip's result."""

    file: str
    reference: str
    hypothesis: str
    substitutions: int
    deletions: int
    insertions: int
    words: int

    @property
    def wer(self) -> float:
        edits = self.substitutions + self.deletions + self.insertions
        return 100 * edits / self.words if self.words else (100.0 if edits else 0.0)


def read_transcripts(folder: str | os.PathLike) -> list[tuple[Path, str]]:
    """(WAV path, transcript) of each line of folder/transcripts.tsv, in file order."""
    folder = Path(folder)
    if not folder.is_dir():
        raise TranscriptsError(
            f"--audio {folder} is not a folder: give a folder of WAV files with {TRANSCRIPTS_FILE}"
        )
    table = folder / TRANSCRIPTS_FILE
    if not table.is_file():
        raise TranscriptsError(
            f"{folder} has no {TRANSCRIPTS_FILE}: write one `file.wav<TAB>transcript` line per "
            "clip (transformer data speech writes it)"
        )
    clips = []
    for number, line in enumerate(table.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        name, tab, text = line.partition("\t")
        if not tab:
            raise TranscriptsError(
                f"{table} line {number} has no tab: write `file.wav<TAB>transcript`"
            )
        path = folder / name
        if not path.is_file():
            raise TranscriptsError(f"{table} line {number} names {name}, which is not in {folder}")
        clips.append((path, text.strip()))
    if not clips:
        raise TranscriptsError(f"{table} lists no clips")
    return clips


def score_transcripts(
    pipeline, folder, batch_size: int | None = None, **decode
) -> tuple[float, list[Clip]]:
    """The corpus WER (x100) of the model's transcripts of the folder's clips, and each clip's
    result."""
    clips = read_transcripts(folder)
    hypotheses = pipeline.transcribe([p for p, _ in clips], batch_size=batch_size, **decode)
    results = [
        Clip(path.name, ref, hyp, *word_errors(hyp, ref))
        for (path, ref), hyp in zip(clips, hypotheses, strict=True)
    ]
    return wer(hypotheses, [ref for _, ref in clips]), results


@torch.no_grad()
def greedy_wer(
    model: torch.nn.Module,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor | None]],
    references: Sequence[str],
    decode: Callable[[list[int]], str],
    prefix: Sequence[int],
    suppress_tokens: Sequence[int],
    begin_suppress_tokens: Sequence[int],
    max_len: int,
) -> float:
    """Corpus WER (x100) of greedy transcripts of batches of (features (B, n_mels, F), frame mask
    (B, F) or None), in the references' order; decode turns output ids into text."""
    hypotheses: list[str] = []
    for features, mask in batches:
        ids = greedy_search(
            model, features, src_mask=mask, max_len_a=0, max_len_b=max_len, prefix=prefix,
            suppress_tokens=suppress_tokens, begin_suppress_tokens=begin_suppress_tokens,
        )  # fmt: skip
        hypotheses += [decode(row).strip() for row in ids.tolist()]
    return wer(hypotheses, references)


def ctc_wer(
    model: torch.nn.Module,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor | None]],
    references: Sequence[str],
    decode: Callable[[list[int]], str],
) -> float:
    """Corpus WER (x100) of the CTC head's best-path transcripts of batches of (features, frame
    mask or None), in the references' order (decoding.ctc)."""
    hypotheses: list[str] = []
    for features, mask in batches:
        hypotheses += [decode(row).strip() for row in ctc_transcribe(model, features, mask)]
    return wer(hypotheses, references)
