"""Typed configuration: the model's shape and the presets of the paper (Table 3).

Every field carries a one-line doc. A config is validated when it is built, and an error
names the field, the bad value and what would be valid.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, fields
from typing import Any


class ConfigError(ValueError):
    """A configuration value is wrong; the message says which and how to fix it."""


def _choice(name: str, value: Any, valid: tuple) -> None:
    if value not in valid:
        raise ConfigError(f"{name}={value!r} is not valid: choose one of {', '.join(map(repr, valid))}")


def _positive(name: str, value: Any, allow_zero: bool = False) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{name}={value!r} is not valid: it must be an integer {bound}")


def _probability(name: str, value: Any) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.0 <= value < 1.0:
        raise ConfigError(f"{name}={value!r} is not valid: it must be a number in [0, 1)")


def unknown_key_error(section: str, key: str, valid: list[str]) -> ConfigError:
    """An error for a mistyped key, naming the closest valid one."""
    close = difflib.get_close_matches(key, valid, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(f"unknown key {section}.{key}{hint}; valid keys: {', '.join(sorted(valid))}")


ARCHS = ("encoder-decoder", "encoder", "decoder")
POSITIONALS = ("sinusoidal", "learned", "rope", "none")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu", "swiglu")


@dataclass(frozen=True)
class ModelConfig:
    """The shape of a Transformer. Defaults are the paper's base model (Table 3)."""

    arch: str = "encoder-decoder"
    """encoder-decoder (the paper), encoder (BERT-style) or decoder (GPT/Llama-style)."""
    vocab_size: int = 37000
    """Token vocabulary; shared by source and target unless tgt_vocab_size is set."""
    tgt_vocab_size: int | None = None
    """Target vocabulary of an encoder-decoder when it is separate (None = shared)."""
    d_model: int = 512
    """Width of every residual stream (§3)."""
    n_heads: int = 8
    """Attention heads h; each has d_model / n_heads dimensions (§3.2.2)."""
    n_kv_heads: int | None = None
    """Key/value heads for grouped-query attention (None = n_heads, plain multi-head)."""
    n_encoder_layers: int = 6
    """Encoder layers N (ignored by decoder-only models)."""
    n_decoder_layers: int = 6
    """Decoder layers N (ignored by encoder-only models)."""
    d_ff: int = 2048
    """Inner width of the position-wise feed-forward network (§3.3)."""
    dropout: float = 0.1
    """Dropout on each sub-layer output and on the embedding sums (§5.4, P_drop)."""
    attention_dropout: float = 0.0
    """Dropout on the attention weights."""
    activation_dropout: float = 0.0
    """Dropout inside the feed-forward network, after the activation."""
    norm_position: str = "post"
    """post: LayerNorm(x + Sublayer(x)) as in the paper; pre: x + Sublayer(LayerNorm(x))."""
    norm: str = "layernorm"
    """layernorm or rmsnorm."""
    norm_eps: float = 1e-5
    """Epsilon inside the norms."""
    final_norm: bool | None = None
    """A norm after the last layer of each stack (None = on for pre-norm, off for post-norm)."""
    positional: str = "sinusoidal"
    """sinusoidal (§3.5), learned, rope (rotary, on queries and keys) or none."""
    max_positions: int = 1024
    """Longest sequence the position encoding covers."""
    rope_base: float = 10000.0
    """Base of the rotary frequencies."""
    sinusoidal_layout: str = "interleaved"
    """interleaved: sin/cos alternate as in §3.5; halves: all sines then all cosines (Marian)."""
    activation: str = "relu"
    """Feed-forward activation: relu (the paper), gelu, gelu_tanh (GPT-2), silu, swiglu (Llama)."""
    bias: bool = True
    """Biases in the linear layers and LayerNorms."""
    output_bias: bool = False
    """A bias on the output projection (Marian's final_logits_bias)."""
    tie_embeddings: bool = True
    """Tie target embedding and output layer (§3.4); with a shared vocabulary, all three."""
    scale_embedding: bool = True
    """Multiply token embeddings by sqrt(d_model) (§3.4)."""
    embedding_norm: bool = False
    """A LayerNorm on the summed embeddings (BERT)."""
    n_token_types: int = 0
    """Token-type (segment) embeddings of the encoder (BERT uses 2; 0 = none)."""
    mlm_head: bool = False
    """A masked-LM head on an encoder-only model (BERT pretraining)."""
    pooler: bool = False
    """A pooled first-token dense + tanh layer on an encoder-only model (BERT's pooler)."""
    n_classes: int = 0
    """Classes of a classifier on the pooled output (0 = none; needs pooler=true)."""
    pad_id: int = 0
    """Padding token id; padding positions are never attended to on the source side."""
    bos_id: int = 2
    """Beginning-of-sequence token id."""
    eos_id: int = 3
    """End-of-sequence token id."""
    decoder_start_id: int | None = None
    """First decoder input of an encoder-decoder (None = bos_id; Marian uses its pad id)."""
    attention_impl: str = "fused"
    """fused: torch's scaled_dot_product_attention; textbook: the explicit softmax(QK^T/sqrt(d))V."""

    def __post_init__(self) -> None:
        _choice("arch", self.arch, ARCHS)
        for name in ("vocab_size", "d_model", "n_heads", "d_ff", "max_positions"):
            _positive(name, getattr(self, name))
        for name in ("n_encoder_layers", "n_decoder_layers", "n_token_types"):
            _positive(name, getattr(self, name), allow_zero=True)
        if self.tgt_vocab_size is not None:
            _positive("tgt_vocab_size", self.tgt_vocab_size)
            if self.arch != "encoder-decoder":
                raise ConfigError(f"tgt_vocab_size={self.tgt_vocab_size} is only for arch='encoder-decoder'; leave it None for arch={self.arch!r}")
        if self.arch in ("encoder-decoder", "encoder") and self.n_encoder_layers == 0:
            raise ConfigError(f"n_encoder_layers=0 is not valid for arch={self.arch!r}: it needs at least 1")
        if self.arch in ("encoder-decoder", "decoder") and self.n_decoder_layers == 0:
            raise ConfigError(f"n_decoder_layers=0 is not valid for arch={self.arch!r}: it needs at least 1")
        if self.d_model % self.n_heads:
            raise ConfigError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}: each head gets d_model / n_heads dimensions")
        if self.n_kv_heads is not None:
            _positive("n_kv_heads", self.n_kv_heads)
            if self.n_heads % self.n_kv_heads:
                raise ConfigError(f"n_kv_heads={self.n_kv_heads} does not divide n_heads={self.n_heads}: each key/value head serves a whole group of query heads")
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            _probability(name, getattr(self, name))
        _choice("norm_position", self.norm_position, ("post", "pre"))
        _choice("norm", self.norm, ("layernorm", "rmsnorm"))
        if not self.norm_eps > 0:
            raise ConfigError(f"norm_eps={self.norm_eps!r} is not valid: it must be > 0")
        _choice("final_norm", self.final_norm, (None, True, False))
        _choice("positional", self.positional, POSITIONALS)
        _choice("sinusoidal_layout", self.sinusoidal_layout, ("interleaved", "halves"))
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ConfigError(f"d_model={self.d_model} must be even for sinusoidal positions (sin/cos pairs)")
        if self.positional == "rope" and self.head_dim % 2:
            raise ConfigError(f"head dimension {self.head_dim} (d_model / n_heads) must be even for rope")
        if not self.rope_base > 0:
            raise ConfigError(f"rope_base={self.rope_base!r} is not valid: it must be > 0")
        _choice("activation", self.activation, ACTIVATIONS)
        _choice("attention_impl", self.attention_impl, ("fused", "textbook"))
        if self.n_token_types and self.arch != "encoder":
            raise ConfigError(f"n_token_types={self.n_token_types} is only for arch='encoder' (BERT); set it to 0")
        _positive("n_classes", self.n_classes, allow_zero=True)
        if (self.mlm_head or self.pooler) and self.arch != "encoder":
            raise ConfigError(f"mlm_head and pooler are heads of arch='encoder' models, not of arch={self.arch!r}")
        if self.n_classes and not self.pooler:
            raise ConfigError(f"n_classes={self.n_classes} needs pooler=true: the classifier reads the pooled output")
        for name in ("pad_id", "bos_id", "eos_id"):
            self._check_id(name, getattr(self, name))
        if self.decoder_start_id is not None:
            self._check_id("decoder_start_id", self.decoder_start_id)
        for name in ("bias", "output_bias", "tie_embeddings", "scale_embedding", "embedding_norm", "mlm_head", "pooler"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}={getattr(self, name)!r} is not valid: it must be true or false")

    def _check_id(self, name: str, value: Any) -> None:
        _positive(name, value, allow_zero=True)
        if value >= self.vocab_size:
            raise ConfigError(f"{name}={value} is outside the vocabulary (vocab_size={self.vocab_size})")

    # Derived values: properties, so they can never disagree with the fields.
    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def target_vocab_size(self) -> int:
        return self.tgt_vocab_size or self.vocab_size

    @property
    def use_final_norm(self) -> bool:
        return self.norm_position == "pre" if self.final_norm is None else self.final_norm

    @property
    def start_id(self) -> int:
        return self.bos_id if self.decoder_start_id is None else self.decoder_start_id

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any], section: str = "model") -> ModelConfig:
        """Build from a plain dict (JSON/TOML), rejecting unknown keys with the closest match."""
        valid = [f.name for f in fields(cls)]
        for key in values:
            if key not in valid:
                raise unknown_key_error(section, key, valid)
        return cls(**values)

    def replace(self, **changes: Any) -> ModelConfig:
        return dataclasses.replace(self, **changes)


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

    def __post_init__(self) -> None:
        _positive("beam_size", self.beam_size)
        _positive("n_best", self.n_best)
        if self.n_best > self.beam_size:
            raise ConfigError(f"n_best={self.n_best} is larger than beam_size={self.beam_size}: a beam cannot return more hypotheses than it keeps")
        _choice("length_penalty_kind", self.length_penalty_kind, ("wu", "power"))
        _positive("max_len_b", self.max_len_b, allow_zero=True)
        _positive("min_len", self.min_len, allow_zero=True)
        _positive("top_k", self.top_k, allow_zero=True)
        _positive("max_new_tokens", self.max_new_tokens)
        _choice("early_stopping", self.early_stopping, (True, False, "never"))
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
        valid = [f.name for f in fields(cls)]
        for key in values:
            if key not in valid:
                raise unknown_key_error(section, key, valid)
        return cls(**values)


def paper_base(vocab_size: int = 37000, **changes: Any) -> ModelConfig:
    """The paper's base model (Table 3): N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1."""
    return ModelConfig(vocab_size=vocab_size, **changes)


def paper_big(vocab_size: int = 37000, **changes: Any) -> ModelConfig:
    """The paper's big model (Table 3): N=6, d_model=1024, d_ff=4096, h=16, P_drop=0.3."""
    values = dict(d_model=1024, d_ff=4096, n_heads=16, dropout=0.3)
    return ModelConfig(vocab_size=vocab_size, **{**values, **changes})


def cpu_small(vocab_size: int = 8000, **changes: Any) -> ModelConfig:
    """A translation model that trains in minutes on a laptop CPU: 3+3 layers, d_model=256."""
    values = dict(d_model=256, d_ff=1024, n_heads=4, n_encoder_layers=3, n_decoder_layers=3,
                  norm_position="pre", max_positions=512)
    return ModelConfig(vocab_size=vocab_size, **{**values, **changes})


def cpu_tiny(vocab_size: int = 64, **changes: Any) -> ModelConfig:
    """A model for tests and the copy task: 2+2 layers, d_model=64."""
    values = dict(d_model=64, d_ff=128, n_heads=4, n_encoder_layers=2, n_decoder_layers=2,
                  dropout=0.0, max_positions=256)
    return ModelConfig(vocab_size=vocab_size, **{**values, **changes})


PRESETS = {"base": paper_base, "big": paper_big, "cpu-small": cpu_small, "cpu-tiny": cpu_tiny}

__all__ = ["ConfigError", "DecodeConfig", "ModelConfig", "PRESETS", "cpu_small", "cpu_tiny", "paper_base", "paper_big",
           "unknown_key_error"]
