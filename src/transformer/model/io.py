"""A model's own files, its config and weights: `config.json` + `model.safetensors` (never pickle),
written atomically (save_weights) and read back with every name and shape checked (load_weights).

The whole model directory (tokenizers, decoding defaults, chat template, labels) is
`transformer.model_dir`'s, and so are the public `save_model` / `load_model`: this module knows
tensors and configs only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch.overrides import TorchFunctionMode

from ..config import ConfigError, ModelConfig
from ..files import atomic_write, atomic_write_text
from .build import build_model, tie_weights
from .transformer import Model

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"


class ModelFileError(ValueError):
    """A model directory is missing, corrupted, or does not match its config."""


def unique_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The state dict with each tied parameter once (under its first name), contiguous for
    safetensors."""
    seen: set[int] = set()
    aliases = set()
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in seen:
            aliases.add(name)
        seen.add(id(param))
    return {k: v.detach().contiguous() for k, v in model.state_dict().items() if k not in aliases}


def save_weights(model: Model, path: str | os.PathLike) -> Path:
    """Write `config.json` and `model.safetensors` into the directory `path` (created if needed).

    The rest of a model directory (tokenizers, decoding defaults) is `transformer.model_dir`'s.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ModelFileError(f"{path} is a file: pass a directory to write the model into")
    path.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.cpu() for k, v in unique_state_dict(model).items()}
    atomic_write(
        path / WEIGHTS_FILE, lambda tmp: save_file(tensors, tmp, metadata={"format": "pt"})
    )
    atomic_write_text(path / CONFIG_FILE, json.dumps(model.config.to_dict(), indent=2) + "\n")
    return path


def load_config(path: str | os.PathLike) -> ModelConfig:
    """Read a model directory's config.json, with errors that name the file."""
    if not Path(path).is_dir():
        raise ModelFileError(
            f"{path} is not a directory: pass a model directory (config.json + model.safetensors)"
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
    try:
        values = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelFileError(
            f"{file} is not valid JSON ({e}): the file is corrupted; re-save the model"
        ) from None
    try:
        return ModelConfig.from_dict(values)
    except (ConfigError, TypeError) as e:
        raise ModelFileError(f"{file}: {e}") from None


def load_weights(path: str | os.PathLike, device: str | torch.device = "cpu") -> Model:
    """Build the model from `config.json` and load `model.safetensors`, checking every name and
    shape.

    The model is built without random initialisation (its parameters are placeholders) and the
    loaded tensors become its parameters as they are, without a copy (weights stored in another
    dtype are converted to the model's float32, as copying into its parameters did); tied
    parameters are tied again. Buffers computed from the config (sinusoids, RoPE) are built as
    usual. Then the model moves to `device`.
    """
    path = Path(path)
    config = load_config(path)
    file = path / WEIGHTS_FILE
    if not file.is_file():
        raise ModelFileError(f"{file} not found: the model directory has a config but no weights")
    try:
        tensors = load_file(file)
    except (SafetensorError, OSError, RuntimeError, ValueError) as e:
        raise ModelFileError(
            f"{file} cannot be read ({e}): the file is truncated or corrupted; "
            "re-save or re-copy it"
        ) from None
    with _SkipInit():
        model = build_model(config)
    expected = unique_state_dict(model)
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise ModelFileError(
            f"{file} does not match {path / CONFIG_FILE}: missing {_names(missing)}, unexpected "
            f"{_names(unexpected)}"
        )
    wrong = [
        f"{k} {tuple(tensors[k].shape)} (config needs {tuple(v.shape)})"
        for k, v in expected.items()
        if tensors[k].shape != v.shape
    ]
    if wrong:
        raise ModelFileError(
            f"{file} does not match {path / CONFIG_FILE}: wrong shapes for {_names(wrong)}"
        )
    tensors = {k: v.to(expected[k].dtype) for k, v in tensors.items()}  # no copy when already fp32
    placeholders = list(model.parameters())
    model.load_state_dict(tensors, strict=False, assign=True)
    tie_weights(model)  # the aliases still hold the placeholders that the loaded tensors replaced
    stale = {id(p) for p in placeholders}
    left = [name for name, p in model.named_parameters(remove_duplicate=False) if id(p) in stale]
    if left:  # a tie that tie_weights does not know about
        raise RuntimeError(
            f"load_weights left {_names(left)} uninitialised: tie them again after loading"
        )
    return model.to(device).eval()


class _SkipInit(TorchFunctionMode):
    """Within it, initialisers return their tensor untouched: no random numbers are drawn.

    For a model whose every parameter is about to be replaced by loaded weights, where the
    initialisation (most of build_model's time) would be thrown away. It catches torch.nn.init's
    functions (some of which reach the mode themselves, some only through the Tensor methods
    below). Like all torch function modes it holds for the current thread only.
    """

    SKIPPED = (
        torch.Tensor.uniform_,
        torch.Tensor.normal_,
    )  # each fills its first argument in place

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.SKIPPED or getattr(func, "__module__", None) == "torch.nn.init":
            return args[0] if args else kwargs["tensor"]
        return func(*args, **kwargs)


def _names(names: list[str]) -> str:
    if not names:
        return "none"
    shown = ", ".join(names[:5])
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")
