"""`transformer transcribe`: speech to text with a speech model (a Whisper import or one trained
here)."""

from __future__ import annotations

import argparse
import json

from ..config import (
    TRANSCRIBE_SETTINGS,
    Bounds,
)
from .common import (
    add_decode_args,
    add_device_args,
    add_flag,
    add_precision_arg,
    decode_overrides,
)
from .loading import (
    speech_pipeline,
)


def cmd_transcribe(args: argparse.Namespace) -> None:
    """One line per audio file: its transcript (--json: the file and its text)."""
    pipeline = speech_pipeline(args, "transcribe")
    texts = pipeline.transcribe(
        args.audio, batch_size=args.batch_size, **decode_overrides(args, TRANSCRIBE_SETTINGS)
    )
    for path, text in zip(args.audio, texts, strict=True):
        print(json.dumps({"file": path, "text": text}, ensure_ascii=False) if args.json else text)


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
