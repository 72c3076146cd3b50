"""The paper's presets (Table 3: base and big) and the CPU recipes' model shapes."""

from __future__ import annotations

from typing import Any

from .model import ModelConfig


def paper_base(vocab_size: int = 37000, **changes: Any) -> ModelConfig:
    """The paper's base model (Table 3): N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1."""
    return ModelConfig(vocab_size=vocab_size, **changes)


def paper_big(vocab_size: int = 37000, **changes: Any) -> ModelConfig:
    """The paper's big model (Table 3): N=6, d_model=1024, d_ff=4096, h=16, P_drop=0.3."""
    values = dict(d_model=1024, d_ff=4096, n_heads=16, dropout=0.3)
    return ModelConfig(vocab_size=vocab_size, **{**values, **changes})


def cpu_small(vocab_size: int = 8000, **changes: Any) -> ModelConfig:
    """A translation model that trains in minutes on a laptop CPU: 3+3 layers, d_model=256."""
    values = dict(
        d_model=256,
        d_ff=1024,
        n_heads=4,
        n_encoder_layers=3,
        n_decoder_layers=3,
        norm_position="pre",
        max_positions=512,
    )
    return ModelConfig(vocab_size=vocab_size, **{**values, **changes})


def cpu_tiny(vocab_size: int = 64, **changes: Any) -> ModelConfig:
    """A model for tests and the copy task: 2+2 layers, d_model=64."""
    values = dict(
        d_model=64,
        d_ff=128,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=2,
        dropout=0.0,
        max_positions=256,
    )
    return ModelConfig(vocab_size=vocab_size, **{**values, **changes})


PRESETS = {"base": paper_base, "big": paper_big, "cpu-small": cpu_small, "cpu-tiny": cpu_tiny}
