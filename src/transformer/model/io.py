"""A model's own files, its config (JSON) and weights (safetensors, never pickle): written
atomically (write_config, write_weights) and read back with every name and shape checked
(read_config, read_weights).

This module knows files, not directories: the model directory, its file names (config.json,
model.safetensors, the tokenizers, ...) and the public `save_model` / `load_model` are
`transformer.model_dir`'s.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch.overrides import TorchFunctionMode

from ..config import ConfigError, ModelConfig
from ..files import atomic_write, atomic_write_text
from .build import build_model, tie_weights
from .transformer import Model


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


def write_config(config: ModelConfig, file: str | os.PathLike) -> None:
    """Write a ModelConfig as JSON to `file`, atomically."""
    atomic_write_text(file, json.dumps(config.to_dict(), indent=2) + "\n")


def write_weights(model: Model, file: str | os.PathLike) -> None:
    """Write the model's tensors (each tied parameter once, on the CPU) to the safetensors `file`,
    atomically."""
    tensors = {k: v.cpu() for k, v in unique_state_dict(model).items()}
    atomic_write(file, lambda tmp: save_file(tensors, tmp, metadata={"format": "pt"}))


def read_config(file: Path) -> ModelConfig:
    """The ModelConfig in the JSON `file` (which exists), with errors that name the file."""
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


def read_tensors(file: Path) -> dict[str, torch.Tensor]:
    """The tensors of the safetensors `file`, with an error that names it."""
    try:
        return load_file(file)
    except (SafetensorError, OSError, RuntimeError, ValueError) as e:
        raise ModelFileError(
            f"{file} cannot be read ({e}): the file is truncated or corrupted; "
            "re-save or re-copy it"
        ) from None


def read_weights(
    config: ModelConfig,
    file: Path,
    config_file: Path,
    tensors: dict[str, torch.Tensor] | None = None,
    prepare: Callable[[Model], None] | None = None,
    optional: set[str] = frozenset(),
) -> Model:
    """Build the model of `config` and load the safetensors `file` into it (or `tensors`, read
    from where `file` names), checking every name and shape (errors name `file` and
    `config_file`); `prepare(model)` changes the built model before its names are checked (LoRA
    adds its adapters); tensors named in `optional` are dropped when the model has no such
    parameter.

    The model is built without random initialisation (its parameters are placeholders) and the
    loaded tensors become its parameters as they are, without a copy (weights stored in another
    dtype are converted to the model's float32, as copying into its parameters did); tied
    parameters are tied again. Buffers computed from the config (sinusoids, RoPE) are built as
    usual. The model is on the CPU, in training mode.
    """
    if tensors is None:
        tensors = read_tensors(file)
    with _SkipInit():
        model = build_model(config)
        if prepare is not None:
            prepare(model)
    expected = unique_state_dict(model)
    tensors = {k: v for k, v in tensors.items() if k in expected or k not in optional}
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise ModelFileError(
            f"{file} does not match {config_file}: missing {_names(missing)}, unexpected "
            f"{_names(unexpected)}"
        )
    wrong = wrong_shapes(tensors, expected, "config needs")
    if wrong:
        raise ModelFileError(f"{file} does not match {config_file}: wrong shapes for {wrong}")
    tensors = {k: v.to(expected[k].dtype) for k, v in tensors.items()}  # no copy when already fp32
    placeholders = list(model.parameters())
    model.load_state_dict(tensors, strict=False, assign=True)
    tie_weights(model)  # the aliases still hold the placeholders that the loaded tensors replaced
    stale = {id(p) for p in placeholders}
    left = [name for name, p in model.named_parameters(remove_duplicate=False) if id(p) in stale]
    if left:  # a tie that tie_weights does not know about
        raise RuntimeError(
            f"read_weights left {_names(left)} uninitialised: tie them again after loading"
        )
    return model


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


def wrong_shapes(
    tensors: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], needs: str
) -> str | None:
    """The names (the first five) whose tensor's shape is not the expected one's, each as `name
    (got) (needs (want))`; None when every shape fits. Both hold the same names."""
    wrong = [
        f"{k} {tuple(tensors[k].shape)} ({needs} {tuple(v.shape)})"
        for k, v in expected.items()
        if tensors[k].shape != v.shape
    ]
    return _names(wrong) if wrong else None


def _names(names: list[str]) -> str:
    if not names:
        return "none"
    shown = ", ".join(names[:5])
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")
