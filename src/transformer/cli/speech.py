"""`transformer transcribe` and `transformer evaluate --audio`: speech to text with a speech model
(a Whisper import or one trained here); the parser beside the handler."""

from __future__ import annotations

import argparse
import json

from ..config import TRANSCRIBE_SETTINGS, Bounds
from .common import (
    UserError,
    add_decode_args,
    add_device_args,
    add_flag,
    add_precision_arg,
    decode_overrides,
    load_pipeline,
)


def _speech_pipeline(args: argparse.Namespace, command: str):
    pipeline = load_pipeline(args, command)
    if pipeline.model.config.audio is None:
        raise UserError(
            f"{args.model_dir} is not a speech model: {command} needs one that reads audio (import "
            'Whisper with transformer import-hf, or train one with objective = "speech")'
        )
    return pipeline


def cmd_transcribe(args: argparse.Namespace) -> None:
    """One line per audio file: its transcript (--json: the file and its text)."""
    pipeline = _speech_pipeline(args, "transcribe")
    texts = pipeline.transcribe(
        args.audio, batch_size=args.batch_size, **decode_overrides(args, TRANSCRIBE_SETTINGS)
    )
    for path, text in zip(args.audio, texts, strict=True):
        print(json.dumps({"file": path, "text": text}, ensure_ascii=False) if args.json else text)


def evaluate_audio(args: argparse.Namespace) -> None:
    """`evaluate --audio DIR`: the word error rate of each clip and of the whole folder."""
    from ..evaluation.transcripts import score_transcripts

    pipeline = _speech_pipeline(args, "evaluate")
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


def register(sub: argparse._SubParsersAction) -> None:
    """`transcribe`."""
    p = sub.add_parser("transcribe", help="speech to text: a transcript of each WAV file")
    p.add_argument("model_dir")
    p.add_argument(
        "audio", nargs="+", help="WAV files (any sample rate; long ones in 30 s windows)"
    )
    p.add_argument("--json", action="store_true", help="print a JSON object per file: file, text")
    add_flag(
        p,
        "--batch-size",
        type=int,
        default=8,
        bounds=Bounds(ge=1),
        give="a number of windows",
        help="30 s windows decoded together (default 8)",
    )
    add_decode_args(p, TRANSCRIBE_SETTINGS)
    add_device_args(p)
    add_precision_arg(p)
    p.set_defaults(func=cmd_transcribe)
