"""transformer: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017) as real
software."""

from .config import ConfigError, DecodeConfig, ModelConfig
from .decoding import beam_search, greedy_search, sample
from .model.accounting import count_parameters, flops_per_image, flops_per_token
from .model.build import build_model
from .model.io import ModelFileError
from .model.transformer import DecoderOnly, EncoderDecoder, EncoderOnly
from .model_dir import load_model, save_model

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DecodeConfig",
    "DecoderOnly",
    "EncoderDecoder",
    "EncoderOnly",
    "ModelConfig",
    "ModelFileError",
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
