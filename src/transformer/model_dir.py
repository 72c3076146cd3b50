"""A whole model directory: what users pass around, and what Pipeline, train, average, export,
serve and import-hf read and write. `ModelDir` is one directory as one record: `ModelDir.read(path)`
reads it whole, `.write(path)` writes it (every file atomically, files.py). `save_model` /
`load_model` and the load_* functions below are the piecewise forms.

    config.json          the ModelConfig                         (model/io.py reads and writes it)
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
    task.json            the task that trained it: {"task": "translation"} (transformer.tasks)
    README.md            a short note saying how the model was made (when its writer gave one)

A model fine-tuned with LoRA adapters (train.lora) holds, in place of model.safetensors, only what
it trained: adapter.safetensors (the adapters, and any new head) and adapter.json (the LoRA
settings, the base model directory it adapts and the SHA-256 of that directory's
model.safetensors; model/lora.py's Adapter). Reading it reads the base's weights first, checked
against that SHA-256, then the adapters; `load_model` folds them into the weights (merge_lora)
unless asked not to (a resumed run keeps training them).

These file names are defined here and nowhere else (the small records' in model_records.py,
with their readers). This module sits above `model/` and `data/`, so that
neither imports the other: `model/io.py` knows config and weight files, and `data/tokenizer.py`
tokenizer files, but neither knows a directory.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file

from .config import ConfigError, DecodeConfig, ModelConfig
from .data.pixels import ImageTokens
from .data.tokenizer import Tokenizer, TokenizerError
from .files import atomic_write, atomic_write_text
from .model.io import (
    ModelFileError,
    read_config,
    read_tensors,
    read_weights,
    unique_state_dict,
    write_config,
    write_weights,
)
from .model.lora import Adapter, add_lora, merge_lora
from .model.transformer import Model
from .model_records import (
    model_files,
    read_json,
    write_json,
    write_records,
)

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
SHARED_FILE = "tokenizer.json"
SOURCE_FILE = "tokenizer.src.json"
TARGET_FILE = "tokenizer.tgt.json"
VOCAB_FILES = (SHARED_FILE, SOURCE_FILE, TARGET_FILE)
"""The tokenizer files: tokenizer.json (shared vocabulary), or the source and target pair."""
README_FILE = "README.md"
ADAPTER_FILE = "adapter.json"
ADAPTER_WEIGHTS_FILE = "adapter.safetensors"

__all__ = [
    "ADAPTER_FILE",
    "ADAPTER_WEIGHTS_FILE",
    "CONFIG_FILE",
    "README_FILE",
    "SHARED_FILE",
    "SOURCE_FILE",
    "TARGET_FILE",
    "VOCAB_FILES",
    "WEIGHTS_FILE",
    "ModelDir",
    "has_tokenizer",
    "load_config",
    "load_model",
    "load_tokenizers",
    "load_weights",
    "save_model",
    "save_tokenizers",
    "save_weights",
]


@dataclass
class ModelDir:
    """A model directory as one value: the model and every other file it holds (None: absent).

    tokenizers: (source, target); the same object twice when the vocabulary is shared.
    decode: the decoding defaults (reading a directory without decode.json gives the defaults).
    """

    model: Model
    tokenizers: tuple[Tokenizer, Tokenizer] | None = None
    decode: DecodeConfig | None = None
    chat: dict | None = None
    labels: list[str] | None = None
    special_tokens: dict[str, str] | None = None
    speech: dict | None = None
    pixels: ImageTokens | None = None
    languages: dict[str, str] | None = None
    """A translation model's {"source": "es", "target": "en"} (languages.json)."""
    task: str | None = None
    """The name of the task that trained it (task.json; None: its config says)."""
    readme: str | None = None

    @classmethod
    def read(
        cls, path: str | os.PathLike, device: str | torch.device = "cpu", lora_scale: float = 1.0
    ) -> ModelDir:
        """Read the model directory `path` whole: the model (in eval mode on `device`; LoRA
        adapters merged, their updates times lora_scale) and every file present, each checked
        (ModelFileError, TokenizerError name the file and the fix)."""
        readme = Path(path) / README_FILE
        model = load_model(path, device, merge=lora_scale == 1.0)
        return cls(
            model if lora_scale == 1.0 else merge_lora(model, lora_scale),
            load_tokenizers(path) if has_tokenizer(path) else None,
            readme=readme.read_text(encoding="utf-8") if readme.is_file() else None,
            **model_files(path),
        )

    def write(self, path: str | os.PathLike) -> Path:
        """Write the directory `path` (created if needed): config.json and model.safetensors, and
        the files whose part is not None; each file atomically."""
        pixels, labels = self.pixels, self.labels
        if pixels is not None and pixels.vocab_size != self.model.config.vocab_size:
            raise ValueError(
                f"the image token layout has {pixels.vocab_size} tokens, the model's vocabulary "
                f"{self.model.config.vocab_size}: they must match"
            )
        n_classes = getattr(self.model.config, "n_classes", 0)
        if labels is not None and len(labels) != n_classes:
            raise ValueError(
                f"{len(labels)} labels for a model with n_classes={n_classes}: give one name "
                "per class"
            )
        path = save_weights(self.model, path)
        if self.tokenizers is not None:
            save_tokenizers(path, *self.tokenizers)
        write_records(
            path,
            decode=self.decode,
            chat=self.chat,
            labels=labels,
            special_tokens=self.special_tokens,
            speech=self.speech,
            pixels=pixels,
            languages=self.languages,
            task=self.task,
        )
        if self.readme is not None:
            atomic_write_text(path / README_FILE, self.readme)
        return path

    def require_tokenizers(self, path: str | os.PathLike) -> tuple[Tokenizer, Tokenizer]:
        """The (source, target) tokenizers, or the error that says which files `path` lacks."""
        if self.tokenizers is None:
            raise TokenizerError(_no_tokenizer(Path(path)))
        return self.tokenizers


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
    languages: dict[str, str] | None = None,
    task: str | None = None,
) -> Path:
    """Write a model directory `path` (created if needed): config.json and model.safetensors, and
    the parts given (ModelDir.write).

    tokenizer: one tokenizer (shared vocabulary -> tokenizer.json) or a (source, target) pair
    (tokenizer.src.json + tokenizer.tgt.json; the same object twice means shared). Anything with
    a `save(file)` method works (`transformer.data.tokenizer.Tokenizer`).
    decode: the decoding defaults, written as decode.json. chat: the chat template record.
    labels: a classifier's class names (labels.json). special_tokens: an encoder's {role: token}.
    speech: a speech model's decoder prompt and suppressed tokens (speech.json).
    pixels: an image generator's token layout (pixels.json). languages: a translation model's
    {"source": "es", "target": "en"} (languages.json). task: the name of the task that trained it
    (task.json).
    """
    if tokenizer is not None and not isinstance(tokenizer, (tuple, list)):
        tokenizer = (tokenizer, tokenizer)
    parts = dict(
        chat=chat,
        labels=labels,
        special_tokens=special_tokens,
        speech=speech,
        languages=languages,
        task=task,
    )
    return ModelDir(model, tokenizer and tuple(tokenizer), decode, pixels=pixels, **parts).write(
        path
    )


def save_weights(model: Model, path: str | os.PathLike) -> Path:
    """Write config.json and model.safetensors into the directory `path` (created if needed); for
    a model with LoRA adapters (model.adapter), adapter.json and adapter.safetensors instead of
    model.safetensors."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ModelFileError(f"{path} is a file: pass a directory to write the model into")
    path.mkdir(parents=True, exist_ok=True)
    adapter = getattr(model, "adapter", None)
    if adapter is None:
        write_weights(model, path / WEIGHTS_FILE)
    else:
        tensors = unique_state_dict(model)
        trained = {name: tensors[name].cpu() for name in adapter.trained}
        atomic_write(
            path / ADAPTER_WEIGHTS_FILE,
            lambda tmp: save_file(trained, tmp, metadata={"format": "pt"}),
        )
        write_json(path / ADAPTER_FILE, adapter.to_dict(), indent=2)
    write_config(model.config, path / CONFIG_FILE)
    return path


def weights_sha256(file: str | os.PathLike) -> str:
    """The SHA-256 of a weights file (what names an adapter's base model)."""
    digest = hashlib.sha256()
    with open(file, "rb") as f:
        while chunk := f.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()


def base_weights(base: str | os.PathLike) -> Path:
    """The model.safetensors of a base model directory for LoRA, or the error that says why it
    cannot be one."""
    path = Path(base)
    if (path / ADAPTER_FILE).is_file():
        raise ModelFileError(
            f"{path} holds LoRA adapters itself: adapt a model with its weights whole; write one "
            f"with transformer export {path} --to dir --out MERGED_DIR"
        )
    file = path / WEIGHTS_FILE
    if not file.is_file():
        raise ModelFileError(f"{file} not found: the base model of the adapters must be there")
    return file


def _read_adapted(path: Path, config: ModelConfig) -> Model:
    """The model of a LoRA model directory (adapter.json, adapter.safetensors): the base's weights
    (checked against the recorded SHA-256), the adapters added, the adapter's tensors loaded; only
    the trained tensors require gradients."""
    try:
        adapter = Adapter.from_dict(read_json(path / ADAPTER_FILE, "an adapter record"))
    except (KeyError, TypeError, ConfigError) as e:
        raise ModelFileError(f"{path / ADAPTER_FILE} is not a valid adapter record ({e})") from None
    file = base_weights(adapter.base)
    if weights_sha256(file) != adapter.base_sha256:
        raise ModelFileError(
            f"{file} has changed since the adapters in {path} were trained on it (its SHA-256 "
            f"differs from {ADAPTER_FILE}'s): put the original base model back at {adapter.base}"
        )
    trained = read_tensors(path / ADAPTER_WEIGHTS_FILE)
    tensors = {k: v for k, v in read_tensors(file).items() if k not in trained}
    model = read_weights(
        config,
        path / ADAPTER_WEIGHTS_FILE,
        path / CONFIG_FILE,
        tensors=tensors | trained,
        prepare=lambda m: add_lora(m, adapter.lora),
        optional=set(tensors),  # the base may hold more: a head the task replaced
    )
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(name in adapter.trained)
    model.adapter = adapter
    return model


def load_config(path: str | os.PathLike) -> ModelConfig:
    """Read a model directory's config.json, with errors that name the file (and, given a run
    directory, its model directories)."""
    if not Path(path).is_dir():
        raise ModelFileError(
            f"{path} is not a directory: pass a model directory ({CONFIG_FILE} + {WEIGHTS_FILE})"
        )
    file = Path(path) / CONFIG_FILE
    if not file.is_file():
        runs = [
            Path(path) / name
            for name in ("best", "last")
            if (Path(path) / name / CONFIG_FILE).is_file()
        ]
        if runs:  # a run directory (what train writes): its model directories are best/ and last/
            also = f" (or {runs[1]})" if len(runs) > 1 else ""
            raise ModelFileError(
                f"{file} not found: {path} is a run directory, not a model directory: "
                f"did you mean {runs[0]}{also}?"
            )
        raise ModelFileError(
            f"{file} not found: {path} is not a model directory (one holds {CONFIG_FILE} "
            f"and {WEIGHTS_FILE})"
        )
    return read_config(file)


def load_weights(
    path: str | os.PathLike, device: str | torch.device = "cpu", merge: bool = True
) -> Model:
    """Build the model from config.json and load model.safetensors, checking every name and
    shape (model/io.read_weights); in eval mode on `device`. A LoRA model directory reads its base
    model's weights and its adapters, folded into the weights unless merge is false."""
    path = Path(path)
    config = load_config(path)
    if (path / ADAPTER_FILE).is_file():
        model = _read_adapted(path, config)
        return (merge_lora(model) if merge else model).to(device).eval()
    file = path / WEIGHTS_FILE
    if not file.is_file():
        raise ModelFileError(f"{file} not found: the model directory has a config but no weights")
    return read_weights(config, file, path / CONFIG_FILE).to(device).eval()


def load_model(
    path: str | os.PathLike, device: str | torch.device = "cpu", merge: bool = True
) -> Model:
    """The model of the model directory `path` (config.json + model.safetensors, every name and
    shape checked), in eval mode on `device`. Its tokenizers are load_tokenizers', its decoding
    defaults load_decode_config's; ModelDir.read reads them all. LoRA adapters are folded into the
    weights (merge=False: kept apart, as a resumed run trains them)."""
    return load_weights(path, device, merge)


def save_tokenizers(
    path: str | os.PathLike, source: Tokenizer, target: Tokenizer | None = None
) -> None:
    """Write tokenizer.json (shared: target None or the same object) or the .src/.tgt pair into
    `path`."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if target is None or target is source:
        source.save(path / SHARED_FILE)
    else:
        source.save(path / SOURCE_FILE)
        target.save(path / TARGET_FILE)


def has_tokenizer(path: str | os.PathLike) -> bool:
    """Whether the directory holds a tokenizer (tokenizer.json or tokenizer.src.json)."""
    path = Path(path)
    return (path / SHARED_FILE).is_file() or (path / SOURCE_FILE).is_file()


def load_tokenizers(model_dir: str | os.PathLike) -> tuple[Tokenizer, Tokenizer]:
    """(source, target) tokenizers of a model directory; the same object when the vocabulary is
    shared."""
    path = Path(model_dir)
    if (path / SHARED_FILE).is_file():
        tok = Tokenizer.load(path / SHARED_FILE)
        return tok, tok
    if (path / SOURCE_FILE).is_file() and (path / TARGET_FILE).is_file():
        return Tokenizer.load(path / SOURCE_FILE), Tokenizer.load(path / TARGET_FILE)
    raise TokenizerError(_no_tokenizer(path))


def _no_tokenizer(path: Path) -> str:
    return f"{path} has no tokenizer: expected {SHARED_FILE} or {SOURCE_FILE} + {TARGET_FILE}"
