"""The small records of a model directory beside its weights and tokenizers (transformer.model_dir
lists them all): decoding defaults, chat template, class labels, special tokens, speech prompt,
image token layout and the task that trained it. Each load_* reads its file, checked, or returns
None (the defaults for decode.json) when the directory has none; the file names are defined here
and nowhere else."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .config import ConfigError, DecodeConfig
from .config.checks import LANGUAGE_CODE
from .data.pixels import ImageTokens, PixelTokenError
from .files import atomic_write_text
from .model.io import ModelFileError

DECODE_FILE = "decode.json"
CHAT_TEMPLATE_FILE = "chat_template.json"
LABELS_FILE = "labels.json"
SPECIAL_TOKENS_FILE = "special_tokens.json"
SPEECH_FILE = "speech.json"
SPEECH_KEYS = ("prompt", "suppress_tokens", "begin_suppress_tokens")
PIXELS_FILE = "pixels.json"
LANGUAGES_FILE = "languages.json"
TASK_FILE = "task.json"


def model_files(path: str | os.PathLike) -> dict:
    """What save_model takes besides the model and tokenizer, as a model directory holds it:
    decode, chat, labels, special_tokens, speech, pixels, languages, task (for copying a
    directory's extras onto another)."""
    return {
        "decode": load_decode_config(path),
        "chat": load_chat_template(path),
        "labels": load_labels(path),
        "special_tokens": load_special_tokens(path),
        "speech": load_speech(path),
        "pixels": load_pixels(path),
        "languages": load_languages(path),
        "task": load_task(path),
    }


def write_records(path: Path, **records) -> None:
    """Write each record given and not None (decode, chat, labels, special_tokens, speech,
    pixels, languages, task) into the model directory `path`, each file atomically."""
    decode, speech, pixels = records.get("decode"), records.get("speech"), records.get("pixels")
    if decode is not None:
        write_json(path / DECODE_FILE, decode.to_dict(), indent=2, ensure_ascii=True)
    for name, file, indent in (
        ("chat", CHAT_TEMPLATE_FILE, 2),
        ("labels", LABELS_FILE, 1),
        ("special_tokens", SPECIAL_TOKENS_FILE, 1),
        ("languages", LANGUAGES_FILE, 1),
    ):
        if records.get(name) is not None:
            value = records[name]
            write_json(path / file, list(value) if name == "labels" else value, indent)
    if speech is not None:
        record = {key: [int(t) for t in speech.get(key, [])] for key in SPEECH_KEYS}
        atomic_write_text(path / SPEECH_FILE, json.dumps(record) + "\n")
    if pixels is not None:
        pixels.save(path / PIXELS_FILE)
    if records.get("task") is not None:
        write_json(path / TASK_FILE, {"task": records["task"]}, 1)


def write_json(file: Path, value, indent: int, ensure_ascii: bool = False) -> None:
    """`value` as JSON in `file`, atomically."""
    atomic_write_text(file, json.dumps(value, indent=indent, ensure_ascii=ensure_ascii) + "\n")


def read_json(file: Path, what: str):
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelFileError(f"{file} is not valid JSON ({e}): {what}") from None


def load_labels(path: str | os.PathLike) -> list[str] | None:
    """A classifier's class names (labels.json), or None when the directory has none."""
    file = Path(path) / LABELS_FILE
    if not file.is_file():
        return None
    labels = read_json(file, "it should be a list of class names")
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise ModelFileError(f"{file} is not a list of class names (strings): fix it or retrain")
    return labels


def load_special_tokens(path: str | os.PathLike) -> dict[str, str] | None:
    """An encoder's special tokens by role (special_tokens.json), or None when the directory has
    none."""
    file = Path(path) / SPECIAL_TOKENS_FILE
    if not file.is_file():
        return None
    record = read_json(file, "it should map roles (cls_token, ...) to tokens")
    if not isinstance(record, dict) or not all(isinstance(v, str) for v in record.values()):
        raise ModelFileError(
            f"{file} does not map roles (cls_token, sep_token, ...) to tokens: fix or delete it"
        )
    return record


def load_languages(path: str | os.PathLike) -> dict[str, str] | None:
    """A translation model's language pair {"source": "es", "target": "en"} (languages.json), or
    None when the directory does not record it."""
    file = Path(path) / LANGUAGES_FILE
    if not file.is_file():
        return None
    record = read_json(file, 'it should be {"source": "es", "target": "en"}')
    if not isinstance(record, dict) or not all(
        isinstance(record.get(side), str) and LANGUAGE_CODE.fullmatch(record[side])
        for side in ("source", "target")
    ):
        raise ModelFileError(
            f'{file} is not a language pair such as {{"source": "es", "target": "en"}}: fix or '
            "delete it"
        )
    return {"source": record["source"], "target": record["target"]}


def load_task(path: str | os.PathLike) -> str | None:
    """The name of the task that trained the model (task.json: {"task": "translation"}, a key of
    transformer.tasks.TASKS), or None when the directory does not record it (an imported model, or
    one written before the record existed: its config then says which task runs it)."""
    file = Path(path) / TASK_FILE
    if not file.is_file():
        return None
    record = read_json(file, 'it should be {"task": "translation"}')
    if not isinstance(record, dict) or not isinstance(record.get("task"), str):
        raise ModelFileError(
            f'{file} does not name a task such as {{"task": "translation"}}: fix or delete it'
        )
    return record["task"]


def load_speech(path: str | os.PathLike) -> dict | None:
    """A speech model's decoder prompt and suppressed token ids (speech.json), or None."""
    file = Path(path) / SPEECH_FILE
    if not file.is_file():
        return None
    record = read_json(file, f"it should hold {', '.join(SPEECH_KEYS)}")
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
        return ImageTokens.from_dict(read_json(file, "an image token layout"))
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
    chat = read_json(file, "re-import the model or delete the file")
    if not isinstance(chat, dict) or not isinstance(chat.get("chat_template"), str):
        raise ModelFileError(
            f'{file} has no "chat_template" string: re-import the model or delete the file'
        )
    return chat
