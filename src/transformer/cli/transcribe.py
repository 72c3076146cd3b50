"""`transformer transcribe`: speech to text with a speech model (a Whisper import or one trained
here). The handler is `transcribe`; its parser is derived from its signature (cli.args), the
decoding settings' flags from DecodeConfig (TRANSCRIBE_SETTINGS)."""

from __future__ import annotations

import argparse
import json
from typing import Annotated

from ..config import TRANSCRIBE_SETTINGS, DecodeConfig
from .args import Arg, Setting, Settings, command
from .common import ModelRun
from .loading import speech_pipeline


def transcribe(
    run: ModelRun,
    audio: Annotated[
        list[str], Arg("WAV files (any sample rate; long ones in 30 s windows)", positional=True)
    ],
    as_json: Annotated[
        bool, Arg("print a JSON object per file: file, text", flag="--json")
    ] = False,
    batch_size: Annotated[int | None, Setting(DecodeConfig)] = None,
    decode: Annotated[dict, Settings(DecodeConfig, TRANSCRIBE_SETTINGS)] = None,
) -> None:
    """One line per audio file: its transcript (--json: the file and its text)."""
    pipeline = speech_pipeline(run, "transcribe")
    texts = pipeline.transcribe(audio, batch_size=batch_size, **(decode or {}))
    for path, text in zip(audio, texts, strict=True):
        print(json.dumps({"file": path, "text": text}, ensure_ascii=False) if as_json else text)


def register(sub: argparse._SubParsersAction) -> None:
    """`transcribe`."""
    command(sub, "transcribe", transcribe, help="speech to text: a transcript of each WAV file")
