"""Typed settings, each defined once (type, default, range, one-line doc): the model's shape
(model.py), decoding (decode.py), a training run and its TOML file (run.py), and the checks they
share (checks.py). The bottom of the house: it imports nothing from the other packages."""

from .checks import ConfigError, from_values, unknown_key_error
from .decode import DecodeConfig
from .model import (
    ACTIVATIONS,
    ARCHS,
    GATED_ACTIVATIONS,
    POSITIONALS,
    PRESETS,
    ModelConfig,
    RelativeBiasConfig,
    VisionConfig,
    cpu_small,
    cpu_tiny,
    paper_base,
    paper_big,
)
from .run import (
    OBJECTIVE_ARCHS,
    OBJECTIVES,
    PRECISIONS,
    SCHEDULES,
    SECTIONS,
    DataConfig,
    RunConfig,
    TrainConfig,
    build_run_config,
    load_config,
    parse_override,
)

__all__ = [
    "ACTIVATIONS", "ARCHS", "GATED_ACTIVATIONS", "OBJECTIVES", "OBJECTIVE_ARCHS", "POSITIONALS", "PRECISIONS",
    "PRESETS", "SCHEDULES", "SECTIONS", "ConfigError", "DataConfig", "DecodeConfig", "ModelConfig",
    "RelativeBiasConfig", "RunConfig", "TrainConfig", "VisionConfig", "build_run_config", "cpu_small",
    "cpu_tiny", "from_values", "load_config", "paper_base", "paper_big", "parse_override",
    "unknown_key_error",
]
