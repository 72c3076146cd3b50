"""A whole model directory: what users pass around, and what Pipeline, train, average and
import-hf read and write. `save_model` writes it, `load_model` gives back its model, and the
load_* functions below its other parts.

    config.json          the ModelConfig                         (model/io.py)
    model.safetensors    the weights, never pickle                (model/io.py)
    tokenizer.json       one shared vocabulary, or
    tokenizer.src.json + tokenizer.tgt.json                       (data/tokenizer.py)
    decode.json          decoding defaults (beam, length penalty, bos)
    chat_template.json   {"chat_template", "bos_token", "eos_token"} of imported chat models
    labels.json          a classifier's class names, in the order of its outputs
    special_tokens.json  an encoder's special tokens by role: pad_token, unk_token, cls_token,
                         sep_token, mask_token (Hugging Face's names; data/tokenizer.EncoderTokens)
    speech.json          a speech model's decoder prompt and suppressed token ids:
                         {"prompt": [...], "suppress_tokens": [...], "begin_suppress_tokens": [...]}
    pixels.json          an image generator's token layout: image size, channels, levels, labels,
                         characters (data/pixels.py)

This module sits above `model/` and `data/`, so that neither imports the other: `model/io.py`
knows configs and weights only, `data/tokenizer.py` knows tokenizer files only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from .config import ConfigError, DecodeConfig
from .data.pixels import ImageTokens, PixelTokenError
from .data.tokenizer import SPECIAL_TOKENS_FILE, has_tokenizer, load_tokenizers, save_tokenizers
from .files import atomic_write_text
from .model.io import ModelFileError, load_weights, save_weights
from .model.transformer import Model

DECODE_FILE = "decode.json"
CHAT_TEMPLATE_FILE = "chat_template.json"
LABELS_FILE = "labels.json"
SPEECH_FILE = "speech.json"
SPEECH_KEYS = ("prompt", "suppress_tokens", "begin_suppress_tokens")
PIXELS_FILE = "pixels.json"

__all__ = [
    "CHAT_TEMPLATE_FILE",
    "DECODE_FILE",
    "LABELS_FILE",
    "PIXELS_FILE",
    "SPECIAL_TOKENS_FILE",
    "SPEECH_FILE",
    "has_tokenizer",
    "load_chat_template",
    "load_decode_config",
    "load_labels",
    "load_model",
    "load_pixels",
    "load_special_tokens",
    "load_speech",
    "load_tokenizers",
    "model_files",
    "save_model",
]


def save_model(
    model: Model,
    path: str | os.PathLike,
    tokenizer=None,
    decode: DecodeConfig | None = None,
    chat: dict | None = None,
    labels: list[str] | None = None,
    special_tokens: dict[str, str] | None = None,
    speech: dict | None = None,
    pixels: ImageTokens | None = None,
) -> Path:
    """Write a model directory `path` (created if needed): config.json and model.safetensors, and
    the parts given.

    tokenizer: one tokenizer (shared vocabulary -> tokenizer.json) or a (source, target) pair
    (tokenizer.src.json + tokenizer.tgt.json; the same object twice means shared). Anything with
    a `save(file)` method works (`transformer.data.tokenizer.Tokenizer`).
    decode: the decoding defaults, written as decode.json. chat: the chat template record.
    labels: a classifier's class names (labels.json). special_tokens: an encoder's {role: token}.
    speech: a speech model's decoder prompt and suppressed tokens (speech.json).
    pixels: an image generator's token layout (pixels.json).
    """
    if pixels is not None and pixels.vocab_size != model.config.vocab_size:
        raise ValueError(
            f"the image token layout has {pixels.vocab_size} tokens, the model's vocabulary "
            f"{model.config.vocab_size}: they must match"
        )
    path = save_weights(model, path)
    if tokenizer is not None:
        source, target = (
            tokenizer if isinstance(tokenizer, (tuple, list)) else (tokenizer, tokenizer)
        )
        save_tokenizers(path, source, target)
    if decode is not None:
        atomic_write_text(path / DECODE_FILE, json.dumps(decode.to_dict(), indent=2) + "\n")
    if chat is not None:
        atomic_write_text(
            path / CHAT_TEMPLATE_FILE, json.dumps(chat, indent=2, ensure_ascii=False) + "\n"
        )
    if labels is not None:
        n_classes = getattr(model.config, "n_classes", 0)
        if len(labels) != n_classes:
            raise ValueError(
                f"{len(labels)} labels for a model with n_classes={n_classes}: give one name per "
                "class"
            )
        atomic_write_text(
            path / LABELS_FILE, json.dumps(list(labels), indent=1, ensure_ascii=False) + "\n"
        )
    if special_tokens is not None:
        atomic_write_text(
            path / SPECIAL_TOKENS_FILE,
            json.dumps(special_tokens, indent=1, ensure_ascii=False) + "\n",
        )
    if speech is not None:
        record = {key: [int(t) for t in speech.get(key, [])] for key in SPEECH_KEYS}
        atomic_write_text(path / SPEECH_FILE, json.dumps(record) + "\n")
    if pixels is not None:
        pixels.save(path / PIXELS_FILE)
    return path


def load_model(path: str | os.PathLike, device: str | torch.device = "cpu") -> Model:
    """The model of the model directory `path` (config.json + model.safetensors, every name and
    shape checked; model/io.load_weights), in eval mode on `device`. Its tokenizers are
    load_tokenizers', its decoding defaults load_decode_config's."""
    return load_weights(path, device)


def model_files(path: str | os.PathLike) -> dict:
    """What save_model takes besides the model and tokenizer, as a model directory holds it:
    decode, chat, labels, special_tokens, speech, pixels (for copying a directory's extras onto
    another)."""
    return {
        "decode": load_decode_config(path),
        "chat": load_chat_template(path),
        "labels": load_labels(path),
        "special_tokens": load_special_tokens(path),
        "speech": load_speech(path),
        "pixels": load_pixels(path),
    }


def _read_json(file: Path, what: str):
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelFileError(f"{file} is not valid JSON ({e}): {what}") from None


def load_labels(path: str | os.PathLike) -> list[str] | None:
    """A classifier's class names (labels.json), or None when the directory has none."""
    file = Path(path) / LABELS_FILE
    if not file.is_file():
        return None
    labels = _read_json(file, "it should be a list of class names")
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise ModelFileError(f"{file} is not a list of class names (strings): fix it or retrain")
    return labels


def load_special_tokens(path: str | os.PathLike) -> dict[str, str] | None:
    """An encoder's special tokens by role (special_tokens.json), or None when the directory has
    none."""
    file = Path(path) / SPECIAL_TOKENS_FILE
    if not file.is_file():
        return None
    record = _read_json(file, "it should map roles (cls_token, ...) to tokens")
    if not isinstance(record, dict) or not all(isinstance(v, str) for v in record.values()):
        raise ModelFileError(
            f"{file} does not map roles (cls_token, sep_token, ...) to tokens: fix or delete it"
        )
    return record


def load_speech(path: str | os.PathLike) -> dict | None:
    """A speech model's decoder prompt and suppressed token ids (speech.json), or None."""
    file = Path(path) / SPEECH_FILE
    if not file.is_file():
        return None
    record = _read_json(file, f"it should hold {', '.join(SPEECH_KEYS)}")
    if not isinstance(record, dict) or not all(
        isinstance(record.get(k, []), list)
        and all(isinstance(t, int) and not isinstance(t, bool) for t in record.get(k, []))
        for k in SPEECH_KEYS
    ):
        raise ModelFileError(
            f"{file} should map {', '.join(SPEECH_KEYS)} to lists of token ids: fix or delete it"
        )
    return {key: list(record.get(key, [])) for key in SPEECH_KEYS}


def load_pixels(path: str | os.PathLike) -> ImageTokens | None:
    """An image generator's token layout (pixels.json), or None when the directory has none."""
    file = Path(path) / PIXELS_FILE
    if not file.exists():
        return None
    try:
        return ImageTokens.from_dict(_read_json(file, "an image token layout"))
    except PixelTokenError as e:
        raise ModelFileError(f"{file}: {e}") from None


def load_decode_config(path: str | os.PathLike) -> DecodeConfig:
    """A model directory's decoding defaults (decode.json), or the defaults when it has none."""
    file = Path(path) / DECODE_FILE
    if not file.is_file():
        return DecodeConfig()
    try:
        return DecodeConfig.from_dict(json.loads(file.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, UnicodeDecodeError, ConfigError, TypeError) as e:
        raise ModelFileError(
            f"{file} is not a valid decoding config ({e}): fix or delete it"
        ) from None


def load_chat_template(path: str | os.PathLike) -> dict | None:
    """The chat template record (chat_template.json), or None when the model has none."""
    file = Path(path) / CHAT_TEMPLATE_FILE
    if not file.is_file():
        return None
    try:
        chat = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelFileError(
            f"{file} is not valid JSON ({e}): re-import the model or delete the file"
        ) from None
    if not isinstance(chat, dict) or not isinstance(chat.get("chat_template"), str):
        raise ModelFileError(
            f'{file} has no "chat_template" string: re-import the model or delete the file'
        )
    return chat
