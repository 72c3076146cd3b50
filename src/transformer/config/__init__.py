"""Typed settings, each defined once (type, default, range, one-line doc): the model's shape
(model.py), decoding (decode.py), a training run (run.py) and its TOML file (toml.py), the server
(serve.py), and the checks they share (checks.py). The bottom of the house: it imports nothing from
the other packages; a component that validates a choice reads its list from here."""

from .checks import Bounds, ConfigError, from_values, setting, settings_of, unknown_key_error
from .data import MIN_BPE_VOCAB, TOKENIZER_KINDS, DataConfig
from .decode import (
    ANSWER_SETTINGS,
    ATTENTION_KINDS,
    CAPTION_SETTINGS,
    EARLY_STOPPING,
    EVALUATE_SEARCH,
    IMAGE_SAMPLING_SETTINGS,
    INFERENCE_PRECISIONS,
    LENGTH_PENALTY_KINDS,
    SAMPLING_SETTINGS,
    SPEECH_SEARCH,
    TRANSCRIBE_SETTINGS,
    TRANSLATE_SETTINGS,
    DecodeConfig,
    MoreThanTheBeam,
)
from .families import (
    AUDIO_POSITIONS,
    DETECTION_BACKBONES,
    DETECTION_QUERIES,
    VISION_POSITIONS,
    AudioConfig,
    ContrastiveConfig,
    DetectionConfig,
    RelativeBiasConfig,
    VisionConfig,
)
from .lora import LORA_TARGETS, LoraConfig
from .model import ACTIVATIONS, ARCHS, ATTENTION_IMPLS, GATED_ACTIVATIONS, POSITIONALS, ModelConfig
from .objectives import OBJECTIVES, Objective
from .presets import PRESETS, cpu_small, cpu_tiny, paper_base, paper_big
from .run import PAIR_METRICS, SECTIONS, RunConfig
from .sections import (
    DOCUMENT_KINDS,
    IMAGE_CONDITIONS,
    AudioData,
    DetectionData,
    ImageData,
    SquadData,
    TextData,
)
from .serve import API_KEY_ENV, ServeConfig
from .sizing import SizingConfig
from .toml import build_run_config, load_config, parse_override, with_overrides
from .train import DEVICES, PRECISIONS, SCHEDULES, TrainConfig

__all__ = [
    "LORA_TARGETS",
    "LoraConfig",
    "ANSWER_SETTINGS",
    "ACTIVATIONS",
    "API_KEY_ENV",
    "ARCHS",
    "ATTENTION_KINDS",
    "ATTENTION_IMPLS",
    "CAPTION_SETTINGS",
    "AUDIO_POSITIONS",
    "DETECTION_BACKBONES",
    "DETECTION_QUERIES",
    "AudioConfig",
    "ContrastiveConfig",
    "DetectionConfig",
    "Bounds",
    "ConfigError",
    "DEVICES",
    "DataConfig",
    "TextData",
    "ImageData",
    "AudioData",
    "DetectionData",
    "SquadData",
    "DecodeConfig",
    "EVALUATE_SEARCH",
    "IMAGE_SAMPLING_SETTINGS",
    "SAMPLING_SETTINGS",
    "SPEECH_SEARCH",
    "TRANSCRIBE_SETTINGS",
    "TRANSLATE_SETTINGS",
    "EARLY_STOPPING",
    "GATED_ACTIVATIONS",
    "INFERENCE_PRECISIONS",
    "LENGTH_PENALTY_KINDS",
    "MIN_BPE_VOCAB",
    "ModelConfig",
    "MoreThanTheBeam",
    "Objective",
    "OBJECTIVES",
    "POSITIONALS",
    "PRECISIONS",
    "PRESETS",
    "RelativeBiasConfig",
    "RunConfig",
    "SCHEDULES",
    "SECTIONS",
    "ServeConfig",
    "TOKENIZER_KINDS",
    "DOCUMENT_KINDS",
    "IMAGE_CONDITIONS",
    "PAIR_METRICS",
    "TrainConfig",
    "VISION_POSITIONS",
    "VisionConfig",
    "build_run_config",
    "cpu_small",
    "cpu_tiny",
    "from_values",
    "load_config",
    "with_overrides",
    "SizingConfig",
    "paper_base",
    "paper_big",
    "parse_override",
    "setting",
    "settings_of",
    "unknown_key_error",
]
