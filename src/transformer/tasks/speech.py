"""Speech recognition: an encoder-decoder over log-mel frames (Whisper's shape), optionally with a
CTC head; run by `transcribe`, scored by the word error rate (`evaluate --audio`)."""

from __future__ import annotations

from pathlib import Path

from ..config import ModelConfig, RunConfig
from .base import Route, Scored, Task
from .figures import AUDIO


def runs(model: ModelConfig, pixels: bool) -> bool:
    return model.audio is not None


def prepare(config: RunConfig, run_dir: Path, dist, say, resume: bool):
    from ..training.objectives import Speech

    return Speech(config, run_dir, dist, say, resume)


def infer(pipeline, audio, **settings):
    """`pipeline(audio)`: the transcript of each recording (Pipeline.transcribe)."""
    return pipeline.transcribe(audio, **settings)


TASK = Task(
    name="speech",
    summary="speech recognition: audio in, its transcript out",
    described="a speech model",
    objectives=("speech",),
    family="speech",
    runs=runs,
    prepare=prepare,
    attention=AUDIO,
    batch_size=8,
    infer=infer,
    command="transcribe",
    routes=(Route("/v1/transcribe"),),
    evaluate=(Scored("--audio", "speech", "a speech model's word error rate"),),
)
