"""Model directories: `config.json` + `model.safetensors` (never pickle), written atomically."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..config import ConfigError, DecodeConfig, ModelConfig
from .transformer import Model, build_model

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
DECODE_FILE = "decode.json"


class ModelFileError(ValueError):
    """A model directory is missing, corrupted, or does not match its config."""


def atomic_write(path: str | os.PathLike, write) -> None:
    """Call write(tmp_path), then rename onto path: readers never see a half-written file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes files owner-only; give them the usual permissions
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def unique_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The state dict with each tied parameter once (under its first name), contiguous for safetensors."""
    seen: set[int] = set()
    aliases = set()
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in seen:
            aliases.add(name)
        seen.add(id(param))
    return {k: v.detach().contiguous() for k, v in model.state_dict().items() if k not in aliases}


def save_model(model: Model, path: str | os.PathLike, tokenizer=None, decode: DecodeConfig | None = None) -> Path:
    """Write `config.json` and `model.safetensors` into the directory `path` (created if needed).

    tokenizer: one tokenizer (shared vocabulary -> tokenizer.json) or a (source, target) pair
    (tokenizer.src.json + tokenizer.tgt.json; the same object twice means shared). Anything with
    a `save(file)` method works (`transformer.data.tokenizer.Tokenizer`).
    decode: the decoding defaults, written as decode.json.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.cpu() for k, v in unique_state_dict(model).items()}
    atomic_write(path / WEIGHTS_FILE, lambda tmp: save_file(tensors, tmp, metadata={"format": "pt"}))
    atomic_write_text(path / CONFIG_FILE, json.dumps(model.config.to_dict(), indent=2) + "\n")
    if tokenizer is not None:
        source, target = tokenizer if isinstance(tokenizer, (tuple, list)) else (tokenizer, tokenizer)
        if source is target:
            source.save(path / "tokenizer.json")
        else:
            source.save(path / "tokenizer.src.json")
            target.save(path / "tokenizer.tgt.json")
    if decode is not None:
        atomic_write_text(path / DECODE_FILE, json.dumps(decode.to_dict(), indent=2) + "\n")
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


def load_tokenizers(path: str | os.PathLike):
    """(source, target) tokenizers of a model directory (see transformer.data.tokenizer.load_tokenizers)."""
    from ..data.tokenizer import load_tokenizers as load

    return load(path)


def load_config(path: str | os.PathLike) -> ModelConfig:
    """Read a model directory's config.json, with errors that name the file."""
    if not Path(path).is_dir():
        raise ModelFileError(f"{path} is not a directory: pass a model directory (config.json + model.safetensors)")
    file = Path(path) / CONFIG_FILE
    if not file.is_file():
        raise ModelFileError(f"{file} not found: a model directory holds {CONFIG_FILE} and {WEIGHTS_FILE}")
    try:
        values = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelFileError(f"{file} is not valid JSON ({e}): the file is corrupted; re-save the model") from None
    try:
        return ModelConfig.from_dict(values)
    except (ConfigError, TypeError) as e:
        raise ModelFileError(f"{file}: {e}") from None


def load_model(path: str | os.PathLike, device: str | torch.device = "cpu") -> Model:
    """Build the model from `config.json` and load `model.safetensors`, checking every name and shape."""
    path = Path(path)
    config = load_config(path)
    file = path / WEIGHTS_FILE
    if not file.is_file():
        raise ModelFileError(f"{file} not found: the model directory has a config but no weights")
    try:
        tensors = load_file(file)
    except (SafetensorError, OSError, RuntimeError, ValueError) as e:
        raise ModelFileError(f"{file} cannot be read ({e}): the file is truncated or corrupted; "
                             "re-save or re-copy it") from None
    model = build_model(config)
    expected = unique_state_dict(model)
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise ModelFileError(
            f"{file} does not match {path / CONFIG_FILE}: missing {_names(missing)}, unexpected {_names(unexpected)}"
        )
    wrong = [f"{k} {tuple(tensors[k].shape)} (config needs {tuple(v.shape)})"
             for k, v in expected.items() if tensors[k].shape != v.shape]
    if wrong:
        raise ModelFileError(f"{file} does not match {path / CONFIG_FILE}: wrong shapes for {_names(wrong)}")
    model.load_state_dict(tensors, strict=False)  # tied aliases share the loaded tensor
    return model.to(device).eval()


def _names(names: list[str]) -> str:
    if not names:
        return "none"
    shown = ", ".join(names[:5])
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")
