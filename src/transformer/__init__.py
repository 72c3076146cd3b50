"""transformer: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017) as real
software.

The public API below is imported on first use (PEP 562), so that `import transformer.config` or
the command line's `--help` do not pay for importing torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

_PUBLIC = {
    "ConfigError": "config",
    "DecodeConfig": "config",
    "ModelConfig": "config",
    "Pipeline": "decoding.pipeline",
    "PipelineError": "decoding.inputs",
    "ModelDir": "model_dir",
    "beam_search": "decoding.beam",
    "greedy_search": "decoding.greedy",
    "sample": "decoding.sampling",
    "count_parameters": "model.accounting",
    "flops_per_image": "model.accounting",
    "flops_per_token": "model.accounting",
    "build_model": "model.build",
    "ModelFileError": "model.io",
    "DecoderOnly": "model.transformer",
    "EncoderDecoder": "model.transformer",
    "EncoderOnly": "model.transformer",
    "load_model": "model_dir",
    "save_model": "model_dir",
}
"""Each public name -> the module (under transformer) that defines it."""

__all__ = [
    "ConfigError",
    "DecodeConfig",
    "DecoderOnly",
    "EncoderDecoder",
    "EncoderOnly",
    "ModelConfig",
    "ModelDir",
    "ModelFileError",
    "Pipeline",
    "PipelineError",
    "beam_search",
    "build_model",
    "count_parameters",
    "flops_per_image",
    "flops_per_token",
    "greedy_search",
    "load_model",
    "sample",
    "save_model",
]


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'transformer' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_PUBLIC[name]}", __name__), name)
    globals()[name] = value  # later look-ups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})


if TYPE_CHECKING:  # what type checkers and editors see
    from .config import ConfigError, DecodeConfig, ModelConfig
    from .decoding.beam import beam_search
    from .decoding.greedy import greedy_search
    from .decoding.inputs import PipelineError
    from .decoding.pipeline import Pipeline
    from .decoding.sampling import sample
    from .model.accounting import count_parameters, flops_per_image, flops_per_token
    from .model.build import build_model
    from .model.io import ModelFileError
    from .model.transformer import DecoderOnly, EncoderDecoder, EncoderOnly
    from .model_dir import ModelDir, load_model, save_model
