"""Speech to text with a speech encoder-decoder (model.audio): audio -> 16 kHz samples -> windows
of the model's length (30 s for Whisper) -> log-mel features -> the decoder, from the model's
prompt -> text.

The rules:
- A window holds max_frames x 160 samples (the hop); audio longer than that is cut into
  consecutive windows, each transcribed on its own and the texts joined with a space (no
  timestamps: a word cut at a window's edge may be lost or split).
- A model trained padded to its whole window (AudioConfig.pad_to_max: Whisper) gets every window
  padded with silence to max_frames; otherwise a batch is padded to its longest window and the
  padding is masked.
- The decoder starts from speech.json's prompt (Whisper: <|startoftranscript|> <|notimestamps|>),
  or the model's start token, and never generates speech.json's suppressed tokens
  (begin_suppress_tokens: not as the first token), as CTranslate2 and Hugging Face do.
- Windows are decoded in batches of batch_size, shortest first; the output is in input order.
- With speech_head = "ctc" the CTC head writes each window's transcript (its best path) and the
  decoder does not run; with "joint" a beam search scores both (transformer.decoding.ctc). A
  model without a CTC head is refused.
"""

from __future__ import annotations

import os

import torch

from ..data.audio import HOP, N_FFT, log_mel, read_wav
from ..model.transformer import EncoderDecoder
from .ctc import ctc_transcribe, joint_search

MIN_SAMPLES = N_FFT
"""A window's tail shorter than one analysis window (25 ms) is dropped."""


class TranscribeError(ValueError):
    """The model or the input cannot be transcribed; the message says why and what to do."""


def speech_options(pipeline) -> dict:
    """prefix, suppress_tokens and begin_suppress_tokens for greedy_search / beam_search."""
    record = pipeline.speech or {}
    return {
        "prefix": record.get("prompt") or [pipeline.model.config.start_id],
        "suppress_tokens": record.get("suppress_tokens", []),
        "begin_suppress_tokens": record.get("begin_suppress_tokens", []),
    }


def as_samples(item) -> torch.Tensor:
    """A WAV path -> its 16 kHz samples; a 1-D float tensor is taken as 16 kHz samples."""
    if isinstance(item, (str, os.PathLike)):
        return read_wav(item)
    if isinstance(item, torch.Tensor) and item.dim() == 1 and item.is_floating_point():
        return item.float()
    raise TranscribeError(
        f"cannot transcribe a {type(item).__name__}: pass WAV file paths or 1-D float tensors of "
        "16 kHz samples"
    )


def windows(samples: torch.Tensor, size: int) -> list[torch.Tensor]:
    """Consecutive windows of `size` samples (the last may be shorter; one under MIN_SAMPLES is
    dropped)."""
    return [w for w in samples.split(size) if len(w) >= MIN_SAMPLES]


def features_batch(
    chunks: list[torch.Tensor], n_mels: int, pad_to: int | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Windows of samples -> (B, n_mels, F) features and a (B, F) frame mask (None when padded to
    the whole window, as Whisper is)."""
    feats = [log_mel(c, n_mels, pad_to=pad_to) for c in chunks]
    if pad_to is not None:
        return torch.stack(feats), None
    width = max(f.shape[-1] for f in feats)
    out = torch.zeros(len(feats), n_mels, width)
    mask = torch.zeros(len(feats), width, dtype=torch.bool)
    for i, f in enumerate(feats):
        out[i, :, : f.shape[-1]] = f
        mask[i, : f.shape[-1]] = True
    return out, mask


def transcribe(pipeline, audio, batch_size: int, **decode) -> list[str]:
    """See the module docstring and Pipeline.transcribe."""
    model = pipeline.model
    if not isinstance(model, EncoderDecoder) or model.config.audio is None:
        raise TranscribeError(
            "this model does not read audio: transcribe needs a speech model (a Whisper import, or "
            'one trained with objective = "speech")'
        )
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise TranscribeError(f"batch_size={batch_size!r} is not valid: give a positive number")
    items = [audio] if isinstance(audio, (str, os.PathLike, torch.Tensor)) else list(audio)
    settings = pipeline.settings(**decode)
    if settings.n_best > 1:
        raise TranscribeError(f"n_best={settings.n_best}: transcribe gives one transcript a file")
    if settings.speech_head != "decoder" and model.ctc_head is None:
        raise TranscribeError(
            f"speech_head={settings.speech_head}: this model has no CTC head; use "
            "speech_head=decoder (the default)"
        )
    a = model.config.audio
    size = a.max_frames * HOP
    pad_to = size if a.pad_to_max else None
    chunks: list[tuple[int, int, torch.Tensor]] = []  # (item, window number, samples)
    texts: list[list[str]] = []  # each item's windows' transcripts
    for i, item in enumerate(items):
        cut = windows(as_samples(item), size)
        chunks += [(i, j, w) for j, w in enumerate(cut)]
        texts.append([""] * len(cut))
    options = speech_options(pipeline)
    order = sorted(range(len(chunks)), key=lambda k: len(chunks[k][2]))
    for start in range(0, len(order), batch_size):
        batch = [chunks[k] for k in order[start : start + batch_size]]
        feats, mask = features_batch([c[2] for c in batch], a.n_mels, pad_to)
        if settings.speech_head == "ctc":
            rows = ctc_transcribe(model, feats, mask)
        elif settings.speech_head == "joint":
            rows = joint_search(
                model, feats, mask, settings.beam_size, settings.ctc_weight, settings.max_len_b,
                options["prefix"],
            )  # fmt: skip
        else:
            rows = pipeline.search(feats, settings, src_mask=mask, **options).tolist()
        for (i, j, _), row in zip(batch, rows, strict=True):
            texts[i][j] = pipeline.target_tokenizer.decode(row).strip()
    return [" ".join(t for t in item_texts if t) for item_texts in texts]
