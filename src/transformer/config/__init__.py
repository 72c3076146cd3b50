"""Typed settings, each defined once (type, default, range, one-line doc): the model's shape
(model.py), decoding (decode.py), a training run (run.py) and its TOML file (toml.py), the server
(serve.py), and the checks they share (checks.py). The bottom of the house: it imports nothing from
the other packages; a component that validates a choice reads its list from here."""

from .checks import Bounds, ConfigError, from_values, setting, settings_of, unknown_key_error
from .decode import (
    ATTENTION_KINDS,
    EARLY_STOPPING,
    INFERENCE_PRECISIONS,
    LENGTH_PENALTY_KINDS,
    DecodeConfig,
)
from .model import (
    ACTIVATIONS,
    ARCHS,
    ATTENTION_IMPLS,
    GATED_ACTIVATIONS,
    POSITIONALS,
    PRESETS,
    VISION_POSITIONS,
    ModelConfig,
    RelativeBiasConfig,
    VisionConfig,
    cpu_small,
    cpu_tiny,
    paper_base,
    paper_big,
)
from .run import (
    DEVICES,
    MIN_BPE_VOCAB,
    OBJECTIVE_ARCHS,
    OBJECTIVES,
    PRECISIONS,
    SCHEDULES,
    SECTIONS,
    TOKENIZER_KINDS,
    DataConfig,
    RunConfig,
    TrainConfig,
)
from .serve import API_KEY_ENV, ServeConfig
from .toml import build_run_config, load_config, parse_override

__all__ = [
    "ACTIVATIONS",
    "API_KEY_ENV",
    "ARCHS",
    "ATTENTION_KINDS",
    "ATTENTION_IMPLS",
    "Bounds",
    "ConfigError",
    "DEVICES",
    "DataConfig",
    "DecodeConfig",
    "EARLY_STOPPING",
    "GATED_ACTIVATIONS",
    "INFERENCE_PRECISIONS",
    "LENGTH_PENALTY_KINDS",
    "MIN_BPE_VOCAB",
    "ModelConfig",
    "OBJECTIVES",
    "OBJECTIVE_ARCHS",
    "POSITIONALS",
    "PRECISIONS",
    "PRESETS",
    "RelativeBiasConfig",
    "RunConfig",
    "SCHEDULES",
    "SECTIONS",
    "ServeConfig",
    "TOKENIZER_KINDS",
    "TrainConfig",
    "VISION_POSITIONS",
    "VisionConfig",
    "build_run_config",
    "cpu_small",
    "cpu_tiny",
    "from_values",
    "load_config",
    "paper_base",
    "paper_big",
    "parse_override",
    "setting",
    "settings_of",
    "unknown_key_error",
]
