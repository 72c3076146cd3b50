"""How to decode: DecodeConfig, the `[decode]` section and a model directory's decode.json."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .checks import ConfigError, check_choice, check_positive, check_types, from_values


@dataclass(frozen=True)
class DecodeConfig:
    """How to decode: search and sampling settings (the `[decode]` section; saved with a model as decode.json)."""

    beam_size: int = 4
    """Beam width (1 = greedy). The paper uses 4 (§6.1)."""
    length_penalty: float = 0.6
    """Length penalty alpha (the paper: 0.6); 0 turns it off."""
    length_penalty_kind: str = "wu"
    """wu: ((5 + |Y|) / 6)^alpha (Wu et al. 2016, the paper's); power: |Y|^alpha (fairseq, Hugging Face)."""
    max_len_a: float = 1.0
    """Maximum output length is max_len_a * source_length + max_len_b (the paper: input + 50)."""
    max_len_b: int = 50
    """See max_len_a."""
    min_len: int = 0
    """Minimum output length (</s> is blocked before it)."""
    n_best: int = 1
    """Hypotheses returned per input."""
    early_stopping: bool | str = True
    """True: stop once beam_size hypotheses are finished; "never": stop when none can still improve."""
    temperature: float = 1.0
    """Sampling temperature (language models)."""
    top_k: int = 0
    """Sample among the k most likely tokens (0 = all)."""
    top_p: float = 1.0
    """Sample from the smallest set whose probability reaches p (1.0 = all)."""
    max_new_tokens: int = 50
    """New tokens to generate from a prompt (language models)."""
    add_bos: bool = True
    """Start a prompt with <s> (bos_id), as our language models are trained; imported models follow their tokenizer."""
    add_eos: bool = False
    """End each source of an encoder-decoder with </s> (eos_id), as T5's and Marian's tokenizers do:
    imported models follow their tokenizer; models trained here read sources without it."""
    precision: str = "fp32"
    """Inference precision: fp32 (exact), bf16, int8 (linear layers, CPU) or auto (bf16 where measured faster)."""

    def __post_init__(self) -> None:
        check_types(self, None)
        check_positive("beam_size", self.beam_size)
        check_positive("n_best", self.n_best)
        if self.n_best > self.beam_size:
            raise ConfigError(f"n_best={self.n_best} is larger than beam_size={self.beam_size}: a beam cannot return more hypotheses than it keeps; raise beam_size or lower n_best")
        check_choice("length_penalty_kind", self.length_penalty_kind, ("wu", "power"))
        check_positive("max_len_b", self.max_len_b, allow_zero=True)
        check_positive("min_len", self.min_len, allow_zero=True)
        check_positive("top_k", self.top_k, allow_zero=True)
        check_positive("max_new_tokens", self.max_new_tokens)
        check_choice("early_stopping", self.early_stopping, (True, False, "never"))
        check_choice("precision", self.precision, ("fp32", "bf16", "int8", "auto"))
        if not self.temperature > 0:
            raise ConfigError(f"temperature={self.temperature!r} is not valid: it must be > 0")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p={self.top_p!r} is not valid: it must be in (0, 1]")
        if not self.max_len_a >= 0:
            raise ConfigError(f"max_len_a={self.max_len_a!r} is not valid: it must be >= 0")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any], section: str = "decode") -> DecodeConfig:
        return from_values(cls, values, section)


