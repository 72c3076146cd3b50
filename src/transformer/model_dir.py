"""A whole model directory: what users pass around, and what Pipeline, train, average and
import-hf read and write.

    config.json          the ModelConfig                         (model/io.py)
    model.safetensors    the weights, never pickle                (model/io.py)
    tokenizer.json       one shared vocabulary, or
    tokenizer.src.json + tokenizer.tgt.json                       (data/tokenizer.py)
    decode.json          decoding defaults (beam, length penalty, bos)
    chat_template.json   {"chat_template", "bos_token", "eos_token"} of imported chat models

This module sits above `model/` and `data/`, so that neither imports the other: `model/io.py`
knows configs and weights only, `data/tokenizer.py` knows tokenizer files only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .config import ConfigError, DecodeConfig
from .data.tokenizer import has_tokenizer, load_tokenizers, save_tokenizers
from .files import atomic_write_text
from .model.io import ModelFileError, load_model, save_weights
from .model.transformer import Model

DECODE_FILE = "decode.json"
CHAT_TEMPLATE_FILE = "chat_template.json"

__all__ = ["CHAT_TEMPLATE_FILE", "DECODE_FILE", "has_tokenizer", "load_chat_template", "load_decode_config",
           "load_model", "load_tokenizers", "save_model"]


def save_model(model: Model, path: str | os.PathLike, tokenizer=None, decode: DecodeConfig | None = None,
               chat: dict | None = None) -> Path:
    """Write a model directory `path` (created if needed): config.json and model.safetensors, and
    the parts given.

    tokenizer: one tokenizer (shared vocabulary -> tokenizer.json) or a (source, target) pair
    (tokenizer.src.json + tokenizer.tgt.json; the same object twice means shared). Anything with
    a `save(file)` method works (`transformer.data.tokenizer.Tokenizer`).
    decode: the decoding defaults, written as decode.json. chat: the chat template record.
    """
    path = save_weights(model, path)
    if tokenizer is not None:
        source, target = tokenizer if isinstance(tokenizer, (tuple, list)) else (tokenizer, tokenizer)
        save_tokenizers(path, source, target)
    if decode is not None:
        atomic_write_text(path / DECODE_FILE, json.dumps(decode.to_dict(), indent=2) + "\n")
    if chat is not None:
        atomic_write_text(path / CHAT_TEMPLATE_FILE, json.dumps(chat, indent=2, ensure_ascii=False) + "\n")
    return path


def load_decode_config(path: str | os.PathLike) -> DecodeConfig:
    """A model directory's decoding defaults (decode.json), or the defaults when it has none."""
    file = Path(path) / DECODE_FILE
    if not file.is_file():
        return DecodeConfig()
    try:
        return DecodeConfig.from_dict(json.loads(file.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, UnicodeDecodeError, ConfigError, TypeError) as e:
        raise ModelFileError(f"{file} is not a valid decoding config ({e}): fix or delete it") from None


def load_chat_template(path: str | os.PathLike) -> dict | None:
    """The chat template record (chat_template.json), or None when the model has none."""
    file = Path(path) / CHAT_TEMPLATE_FILE
    if not file.is_file():
        return None
    try:
        chat = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelFileError(f"{file} is not valid JSON ({e}): re-import the model or delete the file") from None
    if not isinstance(chat, dict) or not isinstance(chat.get("chat_template"), str):
        raise ModelFileError(f"{file} has no \"chat_template\" string: re-import the model or delete the file")
    return chat
