"""Speech recognition: an encoder-decoder over log-mel frames (Whisper's shape), optionally with a
CTC head; run by `transcribe`, scored by the word error rate (`evaluate --audio`)."""

from __future__ import annotations

from pathlib import Path

from ..config import SPEECH_SEARCH, ModelConfig, RunConfig
from .base import Route, Scored, Task
from .evaluation import Evaluation
from .figures import AUDIO
from .reports import open_model


def runs(model: ModelConfig, pixels: bool) -> bool:
    return model.audio is not None


def prepare(config: RunConfig, run_dir: Path, dist, say, resume: bool):
    from ..training.objectives import Speech

    return Speech(config, run_dir, dist, say, resume)


def infer(pipeline, audio, **settings):
    """`pipeline(audio)`: the transcript of each recording (Pipeline.transcribe)."""
    return pipeline.transcribe(audio, **settings)


def evaluate_transcripts(e: Evaluation) -> None:
    """`evaluate --audio DIR`: the word error rate of each clip and of the whole folder."""
    from ..evaluation.transcripts import score_transcripts

    pipeline = open_model(e, TASK)
    decode = e.settings(("beam_size", "length_penalty", "length_penalty_kind", *SPEECH_SEARCH))
    total, clips = score_transcripts(pipeline, e.audio, **decode)
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
    evaluate=(
        Scored("--audio", "speech", "a speech model's word error rate", run=evaluate_transcripts),
    ),
)
