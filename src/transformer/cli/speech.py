"""`evaluate --audio`: a speech model's WER (imported by cli/evaluation.py)."""

from __future__ import annotations

import argparse

from .common import (
    decode_overrides,
)
from .loading import (
    speech_pipeline,
)


def evaluate_audio(args: argparse.Namespace) -> None:
    """`evaluate --audio DIR`: the word error rate of each clip and of the whole folder."""
    from ..evaluation.transcripts import score_transcripts

    pipeline = speech_pipeline(args, "evaluate")
    decode = decode_overrides(
        args, ("beam_size", "length_penalty", "length_penalty_kind", "speech_head", "ctc_weight")
    )
    total, clips = score_transcripts(pipeline, args.audio, **decode)
    for clip in clips:
        print(f"{clip.file}\tWER {clip.wer:.1f}\t{clip.hypothesis}")
    s, d, i = (
        sum(getattr(c, k) for c in clips) for k in ("substitutions", "deletions", "insertions")
    )
    words = sum(c.words for c in clips)
    print(
        f"WER = {total:.2f} ({s} substitutions, {d} deletions, {i} insertions in {words:,} words "
        f"of {len(clips)} clips)"
    )
