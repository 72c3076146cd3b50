"""Typed configuration: the model's shape and the presets of the paper (Table 3).

Every field carries a one-line doc. A config is validated when it is built, and an error
names the field, the bad value and what would be valid.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from .data.text import TsvColumn

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


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


def from_values(cls: type, values: dict[str, Any], section: str) -> Any:
    """A config dataclass from a plain dict (JSON/TOML), rejecting unknown keys with the closest match."""
    valid = [f.name for f in fields(cls)]
    for key in values:
        if key not in valid:
            raise unknown_key_error(section, key, valid)
    return cls(**values)


ARCHS = ("encoder-decoder", "encoder", "decoder")


@dataclass(frozen=True)
class VisionConfig:
    """The image front end of an encoder (ViT): `[model.vision]`. Images are channels x image_size x
    image_size; see transformer.model.patches."""

    image_size: int = 28
    """Height and width of the images, in pixels (square)."""
    patch_size: int = 4
    """Side of the square patches; image_size must be a multiple of it."""
    channels: int = 1
    """Colour channels: 1 (grayscale) or 3 (RGB)."""
    positions: str = "learned"
    """learned (ViT's), sinusoidal2d (fixed, row and column) or none."""

    def __post_init__(self) -> None:
        _check_types(self, "model.vision")
        for name in ("image_size", "patch_size", "channels"):
            _positive(f"model.vision.{name}", getattr(self, name))
        if self.image_size % self.patch_size:
            raise ConfigError(f"model.vision.image_size={self.image_size} is not divisible by patch_size="
                              f"{self.patch_size}: the patches must tile the image")
        _choice("model.vision.positions", self.positions, ("learned", "sinusoidal2d", "none"))

    @property
    def n_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2
@dataclass(frozen=True)
class RelativeBiasConfig:
    """T5's bucketed relative position bias (Raffel et al. 2020): `[model.relative_bias]`, used when
    positional = "t5_bias". A learned scalar per head and bucket of the distance key - query,
    added to the attention scores; see transformer.model.positional.relative_bucket."""

    buckets: int = 32
    """Buckets per direction set: half of them exact distances, the rest logarithmic up to max_distance.
    The encoder splits them between the two directions, the decoder uses them all for the past."""
    max_distance: int = 128
    """Distances from here on share the last bucket."""

    def __post_init__(self) -> None:
        _check_types(self, "model.relative_bias")
        _positive("model.relative_bias.buckets", self.buckets)
        _positive("model.relative_bias.max_distance", self.max_distance)
        if self.buckets < 4:
            raise ConfigError(f"model.relative_bias.buckets={self.buckets} is too few: the encoder halves them "
                              "per direction and each half needs exact and logarithmic buckets (use >= 4, T5: 32)")
        if self.max_distance <= self.buckets // 4:
            raise ConfigError(f"model.relative_bias.max_distance={self.max_distance} must exceed buckets / 4 = "
                              f"{self.buckets // 4}, the largest exact distance of the encoder's buckets")


POSITIONALS = ("sinusoidal", "learned", "rope", "t5_bias", "none")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu", "swiglu", "geglu", "geglu_tanh")
GATED_ACTIVATIONS = {"swiglu": "silu", "geglu": "gelu", "geglu_tanh": "gelu_tanh"}
"""Gated feed-forward activations (Shazeer 2020) -> the activation of their gate."""


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
    d_k: int | None = None
    """Size of each head's queries and keys (§3.2.1's d_k; None = d_model / n_heads). Values keep
    d_model / n_heads dimensions (d_v): the paper's Table 3 (B) shrinks d_k alone."""
    d_v: int | None = None
    """Size of each head's values (None = d_model / n_heads); the heads then concatenate to
    n_heads * d_v before the output projection (T5 v1.1 small: 6 heads of 64 in a 512 model)."""
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
    """sinusoidal (§3.5), learned, rope (rotary, on queries and keys), t5_bias (T5's bucketed
    relative bias on the self-attention scores, model.relative_bias) or none (an image encoder
    takes model.vision.positions instead)."""
    max_positions: int = 1024
    """Longest sequence the position encoding covers."""
    rope_base: float = 10000.0
    """Base of the rotary frequencies."""
    sinusoidal_layout: str = "interleaved"
    """interleaved: sin/cos alternate as in §3.5; halves: all sines then all cosines (Marian)."""
    activation: str = "relu"
    """Feed-forward activation: relu (the paper), gelu, gelu_tanh (GPT-2), silu, or a gated one
    (Shazeer 2020: act(x W1) * x W3, a third matrix): swiglu (Llama), geglu, geglu_tanh (T5 v1.1)."""
    bias: bool = True
    """Biases in the linear layers and LayerNorms."""
    output_bias: bool = False
    """A bias on the output projection (Marian's final_logits_bias)."""
    tie_embeddings: bool = True
    """Tie target embedding and output layer (§3.4); with a shared vocabulary, all three."""
    share_embeddings: bool | None = None
    """Encoder and decoder read one token embedding (None = when the vocabulary is shared and
    tie_embeddings is on). true with tie_embeddings = false: shared inputs, a separate output
    layer (T5 v1.1)."""
    scale_attention: bool = True
    """Divide the attention scores by sqrt(d_k) (§3.2.1). T5 does not: it folds the factor into
    its initialisation (false)."""
    scale_output: bool = False
    """Multiply the decoder's final state by d_model^-1/2 before the output layer (T5 v1.0, whose
    output layer is the tied embedding)."""
    scale_embedding: bool = True
    """Multiply token embeddings by sqrt(d_model) (§3.4)."""
    embedding_norm: bool = False
    """A LayerNorm on the summed embeddings (BERT)."""
    n_token_types: int = 0
    """Token-type (segment) embeddings of the encoder (BERT uses 2; 0 = none)."""
    mlm_head: bool = False
    """A masked-LM head on an encoder-only model (BERT pretraining)."""
    pooler: bool = False
    """BERT's pooler: a dense + tanh layer on the pooled hidden state of an encoder-only model."""
    pooling: str = "first"
    """What the pooler and classifier read: "first" (the first token's state, [CLS]: BERT's, the
    default) or "mean" (the mean over real tokens, as sentence-transformers and ViT variants do)."""
    n_classes: int = 0
    """Classes of a classifier on the pooled output of an encoder-only model (0 = none)."""
    pad_id: int = 0
    """Padding token id; padding positions are never attended to on the source side."""
    bos_id: int = 2
    """Beginning-of-sequence token id."""
    eos_id: int = 3
    """End-of-sequence token id."""
    decoder_start_id: int | None = None
    """First decoder input of an encoder-decoder (None = bos_id; Marian uses its pad id)."""
    attention_impl: str = "auto"
    """fused: torch's scaled_dot_product_attention; textbook: the explicit softmax(QK^T/sqrt(d))V;
    auto: fused, except that training measures both at its batch shape and takes the faster (precision.py)."""
    vision: VisionConfig | None = None
    """An image encoder (ViT): patches instead of token ids ([model.vision]; arch = "encoder" only)."""
    relative_bias: RelativeBiasConfig | None = None
    """T5's relative position bias ([model.relative_bias]); set (with defaults) when positional = "t5_bias"."""

    def __post_init__(self) -> None:
        if isinstance(self.vision, dict):  # from JSON / TOML
            object.__setattr__(self, "vision", from_values(VisionConfig, self.vision, "model.vision"))
        if self.vision is not None and not isinstance(self.vision, VisionConfig):
            raise ConfigError(f"vision={self.vision!r} is not valid: give a [model.vision] table or a VisionConfig")
        if isinstance(self.relative_bias, dict):
            object.__setattr__(self, "relative_bias",
                               from_values(RelativeBiasConfig, self.relative_bias, "model.relative_bias"))
        if self.relative_bias is None and self.positional == "t5_bias":
            object.__setattr__(self, "relative_bias", RelativeBiasConfig())
        if self.relative_bias is not None and not isinstance(self.relative_bias, RelativeBiasConfig):
            raise ConfigError(f"relative_bias={self.relative_bias!r} is not valid: give a [model.relative_bias] "
                              "table or a RelativeBiasConfig")
        if self.relative_bias is not None and self.positional != "t5_bias":
            raise ConfigError(f"model.relative_bias is set but positional={self.positional!r}: set positional = "
                              "\"t5_bias\" to use it, or remove the [model.relative_bias] table")
        _check_types(self, None)
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
        if self.d_v is None and self.d_model % self.n_heads:
            raise ConfigError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}: each head gets d_model / n_heads dimensions")
        for name in ("d_k", "d_v"):
            if getattr(self, name) is not None:
                _positive(name, getattr(self, name))
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
        if self.positional == "rope" and self.qk_dim % 2:
            raise ConfigError(f"query/key dimension {self.qk_dim} (d_k, else d_model / n_heads) must be even for rope")
        if not self.rope_base > 0:
            raise ConfigError(f"rope_base={self.rope_base!r} is not valid: it must be > 0")
        _choice("activation", self.activation, ACTIVATIONS)
        _choice("attention_impl", self.attention_impl, ("auto", "fused", "textbook"))
        if self.n_token_types and self.arch != "encoder":
            raise ConfigError(f"n_token_types={self.n_token_types} is only for arch='encoder' (BERT); set it to 0")
        _positive("n_classes", self.n_classes, allow_zero=True)
        if (self.mlm_head or self.pooler) and self.arch != "encoder":
            raise ConfigError(f"mlm_head and pooler are heads of arch='encoder' models, not of arch={self.arch!r}")
        if self.vision is not None:
            if self.arch != "encoder":
                raise ConfigError(f"model.vision is for arch='encoder' (ViT), not arch={self.arch!r}")
            if self.mlm_head or self.n_token_types:
                raise ConfigError("an image encoder (model.vision) has no masked-LM head or token types: "
                                  "leave mlm_head and n_token_types at false and 0")
            if self.vision.n_patches + 1 > self.max_positions:
                raise ConfigError(f"{self.vision.n_patches} patches + [CLS] exceed max_positions={self.max_positions}")
        if self.n_classes and self.arch != "encoder":
            raise ConfigError(f"n_classes={self.n_classes} is for arch='encoder' classifiers, not arch={self.arch!r}")
        _choice("pooling", self.pooling, ("first", "mean"))
        for name in ("pad_id", "bos_id", "eos_id"):
            self._check_id(name, getattr(self, name))
        if self.decoder_start_id is not None:
            self._check_id("decoder_start_id", self.decoder_start_id)
        _choice("share_embeddings", self.share_embeddings, (None, True, False))
        if self.share_embeddings and self.tgt_vocab_size is not None:
            raise ConfigError(f"share_embeddings=true needs one vocabulary, but tgt_vocab_size={self.tgt_vocab_size}: "
                              "remove tgt_vocab_size or set share_embeddings = false")
        for name in ("bias", "output_bias", "tie_embeddings", "scale_embedding", "embedding_norm", "mlm_head", "pooler",
                     "scale_attention", "scale_output"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}={getattr(self, name)!r} is not valid: it must be true or false")

    def _check_id(self, name: str, value: Any) -> None:
        _positive(name, value, allow_zero=True)
        if value >= self.vocab_size:
            raise ConfigError(f"{name}={value} is outside the vocabulary (vocab_size={self.vocab_size})")

    # Derived values: properties, so they can never disagree with the fields.
    @property
    def head_dim(self) -> int:
        """Each head's value size: d_v, else d_model / n_heads."""
        return self.d_v or self.d_model // self.n_heads

    @property
    def qk_dim(self) -> int:
        """Each head's query/key size: d_k, else d_model / n_heads."""
        return self.d_k or self.head_dim

    @property
    def shares_embeddings(self) -> bool:
        """Whether an encoder-decoder's encoder and decoder read one token embedding."""
        if self.share_embeddings is not None:
            return self.share_embeddings
        return self.tgt_vocab_size is None and self.tie_embeddings

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
        return from_values(cls, values, section)

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
    add_bos: bool = True
    """Start a prompt with <s> (bos_id), as our language models are trained; imported models follow their tokenizer."""
    add_eos: bool = False
    """End each source of an encoder-decoder with </s> (eos_id), as T5's and Marian's tokenizers do:
    imported models follow their tokenizer; models trained here read sources without it."""
    precision: str = "fp32"
    """Inference precision: fp32 (exact), bf16, int8 (linear layers, CPU) or auto (bf16 where measured faster)."""

    def __post_init__(self) -> None:
        _check_types(self, None)
        _positive("beam_size", self.beam_size)
        _positive("n_best", self.n_best)
        if self.n_best > self.beam_size:
            raise ConfigError(f"n_best={self.n_best} is larger than beam_size={self.beam_size}: a beam cannot return more hypotheses than it keeps; raise beam_size or lower n_best")
        _choice("length_penalty_kind", self.length_penalty_kind, ("wu", "power"))
        _positive("max_len_b", self.max_len_b, allow_zero=True)
        _positive("min_len", self.min_len, allow_zero=True)
        _positive("top_k", self.top_k, allow_zero=True)
        _positive("max_new_tokens", self.max_new_tokens)
        _choice("early_stopping", self.early_stopping, (True, False, "never"))
        _choice("precision", self.precision, ("fp32", "bf16", "int8", "auto"))
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


def _check_types(obj: Any, section: str | None) -> None:
    """Check each field against its annotation (str, int, float, bool, optionally `| None`);
    section prefixes the field's name in the message (None: the bare name)."""
    kinds = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,)}
    for f in fields(obj):
        value = getattr(obj, f.name)
        parts = [p.strip() for p in str(f.type).split("|")]
        if value is None and "None" in parts:
            continue
        allowed = tuple(t for p in parts if p in kinds for t in kinds[p])
        if not allowed:  # a nested config (VisionConfig): it checks itself
            continue
        ok = isinstance(value, allowed) and not (isinstance(value, bool) and bool not in allowed)
        if not ok:
            want = " or ".join(p for p in parts if p != "None")
            name = f"{section}.{f.name}" if section else f.name
            raise ConfigError(f"{name}={value!r} is not valid: it must be {want}")


@dataclass(frozen=True)
class DataConfig:
    """Where the training text is and how to tokenize it (the `[data]` section)."""

    train_src: str | None = None
    """Source side of the aligned training files (translation), one sentence per line."""
    train_tgt: str | None = None
    """Target side of the aligned training files, line i translating train_src line i."""
    valid_src: str | None = None
    """Source side of the validation files (optional)."""
    valid_tgt: str | None = None
    """Target side of the validation files."""
    train_text: str | None = None
    """Training text of a language model (arch = "decoder"), one document or sentence per line."""
    valid_text: str | None = None
    """Validation text of a language model or masked-LM (optional)."""
    train_tsv: str | None = None
    """Labelled training texts of a classifier: one `label<TAB>text` per line."""
    valid_tsv: str | None = None
    """Labelled validation texts (optional); every label must occur in train_tsv."""
    train_pairs: str | None = None
    """Text-to-text training pairs of an encoder-decoder: one `input<TAB>target` per line (e.g. a
    mixture of tasks named by a prefix of the input, as `transformer data bible-t2t` writes)."""
    valid_pairs: str | None = None
    """Text-to-text validation pairs (optional), as train_pairs."""
    train_images: str | None = None
    """Labelled training images of an image classifier (model.vision): a prepared split (.safetensors,
    from transformer data fashion-mnist) or a folder of class folders DIR/<label>/*.png|jpg."""
    valid_images: str | None = None
    """Labelled validation images (optional), as train_images; every label must occur there."""
    random_crop: int = 0
    """Images: pad each side by this many pixels (zeros) and crop back at a random place (0 = off)."""
    horizontal_flip: bool = False
    """Images: mirror left-right with probability 1/2."""
    tokenizer: str = "bpe"
    """How text is cut into tokens, trained on the training files: "bpe" (byte-level BPE), "unigram"
    (SentencePiece's Unigram), "word" (whole words and punctuation; the rest <unk>) or "char"
    (characters; ~5x longer sequences than BPE: set max_len for them). See transformer.data.tokenizer."""
    vocab_size: int = 8000
    """Size of the vocabulary to train, special tokens included (the model's vocabulary comes from it);
    "char" needs room for every character seen min_frequency times."""
    shared_vocab: bool = True
    """One joint BPE vocabulary for source and target (the paper's, §5.1); false = one per side."""
    min_frequency: int = 2
    """A pair must occur this often to become a BPE merge."""
    max_len: int = 256
    """Pairs with a side longer than this many tokens (with <s>/</s>) are dropped, and counted. Tokens,
    not words: a "char" tokenizer needs about 5x the max_len of "bpe" for the same sentences."""
    tokenizer_sample: int = 200_000
    """Train the tokenizer on at most this many examples, chosen at random (0: all of them); BPE's
    merge statistics settle long before millions of lines."""
    bpe_dropout: float = 0.0
    """BPE-dropout (Provilkov et al. 2020): when segmenting the training sentences, skip each merge
    with this probability (0.1 in the paper), so that a word comes in several segmentations, a
    regulariser for many epochs of a small corpus. Validation, evaluation and translation segment
    as trained. BPE tokenizers and objectives seq2seq / lm only."""
    segmentations: int = 8
    """With bpe_dropout: how many dropped segmentations of the training corpus are prepared (each
    a corpus in the cache); epoch e trains on segmentation e mod this."""
    sentinels: int = 100
    """span_corruption: the sentinel tokens <extra_id_0> ... <extra_id_{n-1}> the trained tokenizer
    reserves after its four special tokens (T5: 100); a text can have at most this many noise spans."""
    cache: str | None = None
    """Folder for prepared corpora (token ids in memory-mapped arrays, built on first use, see
    transformer.data.corpus); default $TRANSFORMER_CACHE_DIR/corpora, else ~/.cache/transformer/corpora."""

    def __post_init__(self) -> None:
        _check_types(self, "data")
        _positive("data.vocab_size", self.vocab_size)
        if self.tokenizer not in ("bpe", "unigram", "word", "char"):
            raise ConfigError(f"data.tokenizer={self.tokenizer!r} is not valid: it must be bpe, unigram, word or char")
        if self.tokenizer == "bpe" and self.vocab_size < 260:
            raise ConfigError(f"data.vocab_size={self.vocab_size} is too small: a byte-level BPE needs at least 260 "
                              "(256 bytes + 4 special tokens)")
        _positive("data.min_frequency", self.min_frequency)
        _positive("data.max_len", self.max_len)
        _positive("data.sentinels", self.sentinels)
        if self.tokenizer_sample < 0:
            raise ConfigError(f"data.tokenizer_sample={self.tokenizer_sample}: give a number of examples, or 0 for all")
        if not 0.0 <= self.bpe_dropout < 1.0:
            raise ConfigError(f"data.bpe_dropout={self.bpe_dropout} must be in [0, 1): the probability of skipping "
                              "a merge (0 = off; Provilkov et al. use 0.1)")
        if self.bpe_dropout and self.tokenizer != "bpe":
            raise ConfigError(f"data.bpe_dropout is for data.tokenizer = \"bpe\", not {self.tokenizer!r}: "
                              "set data.bpe_dropout = 0")
        _positive("data.segmentations", self.segmentations)
        if (self.train_src is None) != (self.train_tgt is None):
            raise ConfigError("set both data.train_src and data.train_tgt (aligned files), or neither")
        if (self.valid_src is None) != (self.valid_tgt is None):
            raise ConfigError("set both data.valid_src and data.valid_tgt (aligned files), or neither")
        given = [name for name, value in (("train_src/train_tgt", self.train_src), ("train_text", self.train_text),
                                          ("train_tsv", self.train_tsv), ("train_images", self.train_images),
                                          ("train_pairs", self.train_pairs))
                 if value is not None]
        if len(given) > 1:
            raise ConfigError(f"set one kind of training data, not {' and '.join('data.' + g for g in given)}: "
                              "train_src/train_tgt (translation), train_pairs (text-to-text TSV), train_text "
                              "(language model, masked-LM, span corruption), train_tsv (text classification) or "
                              "train_images (image classification)")
        if not given:
            raise ConfigError("no training data: set data.train_src and data.train_tgt (translation), "
                              "data.train_pairs (text-to-text), data.train_text (language model, masked-LM), "
                              "data.train_tsv (text classification) or data.train_images (image classification)")
        _positive("data.random_crop", self.random_crop, allow_zero=True)
        if self.valid_src is not None and self.train_src is None:
            raise ConfigError("data.valid_src/valid_tgt are set but data.train_src/train_tgt are not: validation "
                              "data must be of the training data's kind")
        for train, valid in (("train_text", "valid_text"), ("train_tsv", "valid_tsv"), ("train_images", "valid_images"),
                             ("train_pairs", "valid_pairs")):
            if getattr(self, valid) is not None and getattr(self, train) is None:
                raise ConfigError(f"data.{valid} is set but data.{train} is not: validation data must be of the "
                                  "training data's kind")

    @property
    def is_translation(self) -> bool:
        """Source -> target pairs: aligned files or a text-to-text TSV."""
        return self.train_src is not None or self.train_pairs is not None

    @property
    def train_files(self) -> tuple[str, str | None]:
        """(targets, sources) of the training data; sources None for a language model (for a
        classifier, the TSV file: its texts are the targets; text-to-text pairs: the TSV's two
        columns, data.text.TsvColumn)."""
        if self.train_pairs is not None:
            return TsvColumn(self.train_pairs, 1), TsvColumn(self.train_pairs, 0)
        if self.is_translation:
            return self.train_tgt, self.train_src
        return (self.train_text or self.train_tsv), None

    @property
    def valid_files(self) -> tuple[str | None, str | None]:
        """(targets, sources) of the validation data; targets None when there is none."""
        if self.valid_pairs is not None:
            return TsvColumn(self.valid_pairs, 1), TsvColumn(self.valid_pairs, 0)
        if self.is_translation:
            return self.valid_tgt, self.valid_src
        return (self.valid_text or self.valid_tsv), None


PRECISIONS = ("auto", "fp32", "bf16", "fp16")
OBJECTIVES = ("seq2seq", "lm", "mlm", "classify", "span_corruption")
OBJECTIVE_ARCHS = {"seq2seq": "encoder-decoder", "lm": "decoder", "mlm": "encoder", "classify": "encoder",
                   "span_corruption": "encoder-decoder"}
"""The model family each objective trains."""
SCHEDULES = ("inverse_sqrt", "cosine")


@dataclass(frozen=True)
class TrainConfig:
    """The training recipe (the `[train]` section). Defaults are the paper's (§5.3, §5.4)."""

    seed: int = 1
    """Seed of the model's initialisation, dropout and batch shuffling."""
    batch_tokens: int = 4096
    """Padded tokens per batch on each process (the paper: ~25,000 source + 25,000 target per step)."""
    accumulate: int = 1
    """Batches whose gradients are summed per optimiser step (effective batch = batch_tokens x accumulate x processes)."""
    max_steps: int = 100000
    """Stop after this many optimiser steps (the paper: 100,000 for base, 300,000 for big)."""
    max_epochs: int = 0
    """Stop after this many passes over the data (0 = no limit)."""
    max_minutes: float = 0.0
    """Stop cleanly after this much wall-clock time, validation included (0 = no limit)."""
    objective: str | None = None
    """What to learn: "seq2seq" (translation, from train_src/train_tgt), "lm" (next token, arch =
    "decoder"), "mlm" (BERT's masked-LM, arch = "encoder", on train_text), "classify" (a label per
    text, arch = "encoder", on train_tsv) or "span_corruption" (T5's pretraining, arch =
    "encoder-decoder", on train_text). None: from the data and arch (see RunConfig.objective)."""
    mlm_probability: float = 0.15
    """mlm: share of tokens chosen for prediction; of those 80% become [MASK], 10% a random token, 10% stay."""
    noise_density: float = 0.15
    """span_corruption: share of each text's tokens hidden (T5: 0.15)."""
    mean_span: float = 3.0
    """span_corruption: mean length of a hidden span (T5: 3)."""
    init_from: str | None = None
    """A model directory to fine-tune from: its tokenizer and model config are used (a classifier
    takes only its head from [model]: pooling, pooler; the head is new)."""
    freeze_encoder: bool = False
    """classify with init_from: train the new head only, the pretrained encoder stays as it is."""
    schedule: str = "inverse_sqrt"
    """inverse_sqrt: the paper's warmup then step^-0.5 decay (§5.3); cosine: linear warmup then cosine to
    min_lr, reached at max_steps or at the end of max_minutes, whichever comes first (under a time
    budget the decay follows the clock, so it ends when the run does)."""
    warmup_steps: int = 4000
    """Steps of linear warmup (the paper: 4000)."""
    lr_factor: float = 1.0
    """inverse_sqrt: multiplies d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)."""
    lr: float = 5e-4
    """cosine: the peak learning rate reached after warmup."""
    min_lr: float = 0.0
    """cosine: the learning rate at the end (max_steps or max_minutes)."""
    adam_beta1: float = 0.9
    """Adam beta1 (the paper: 0.9)."""
    adam_beta2: float = 0.98
    """Adam beta2 (the paper: 0.98)."""
    adam_eps: float = 1e-9
    """Adam epsilon (the paper: 1e-9)."""
    weight_decay: float = 0.0
    """Decoupled weight decay (AdamW style; the paper: none)."""
    label_smoothing: float = 0.1
    """Label smoothing epsilon (§5.4: 0.1); spread over the vocabulary minus padding."""
    late_dropout: float = 0.0
    """Share of training (of max_minutes when set, else of max_steps; whichever is further along) run
    with every dropout of the model off before they start at their rates (Liu et al. 2023, "late
    dropout": training.dropout); 0 = dropout from the first step."""
    clip_norm: float = 0.0
    """Clip the gradient's global L2 norm to this (0 = no clipping; the paper does not clip)."""
    precision: str = "auto"
    """auto (bf16 where measured faster: see transformer.precision); fp32; bf16 (autocast, CPU or GPU);
    fp16 (autocast + gradient scaling, GPU only). The run's config.toml records the resolved one."""
    device: str = "auto"
    """auto (cuda when available), cpu or cuda."""
    valid_every: int = 1000
    """Validate every this many steps (a final validation always runs)."""
    bleu_samples: int = 200
    """Translation: greedy-decode this many validation pairs at each validation for BLEU (0 = off)."""
    save_every: int = 1000
    """Write a checkpoint every this many steps (and at the end)."""
    keep_last: int = 5
    """Checkpoints to keep (older ones are deleted; best/ and last/ are kept apart)."""
    log_every: int = 100
    """Plain log lines every this many steps when not on a terminal (metrics.jsonl gets every step)."""
    num_threads: int = 0
    """CPU threads for torch (0 = torch's default)."""

    def __post_init__(self) -> None:
        _check_types(self, "train")
        for name in ("batch_tokens", "accumulate", "max_steps", "valid_every", "save_every", "keep_last", "log_every"):
            _positive(f"train.{name}", getattr(self, name))
        for name in ("seed", "max_epochs", "warmup_steps", "num_threads", "bleu_samples"):
            _positive(f"train.{name}", getattr(self, name), allow_zero=True)
        _choice("train.schedule", self.schedule, SCHEDULES)
        _choice("train.objective", self.objective, (None, *OBJECTIVES))
        if not 0 < self.mlm_probability < 1:
            raise ConfigError(f"train.mlm_probability={self.mlm_probability!r} is not valid: it must be in (0, 1)")
        if not 0 < self.noise_density < 1:
            raise ConfigError(f"train.noise_density={self.noise_density!r} is not valid: it must be in (0, 1)")
        if not self.mean_span >= 1:
            raise ConfigError(f"train.mean_span={self.mean_span!r} is not valid: it must be >= 1")
        _choice("train.precision", self.precision, PRECISIONS)
        _choice("train.device", self.device, ("auto", "cpu", "cuda"))
        _probability("train.label_smoothing", self.label_smoothing)
        _probability("train.late_dropout", self.late_dropout)
        for name in ("adam_beta1", "adam_beta2"):
            _probability(f"train.{name}", getattr(self, name))
        for name in ("max_minutes", "lr_factor", "lr", "min_lr", "adam_eps", "weight_decay", "clip_norm"):
            if getattr(self, name) < 0:
                raise ConfigError(f"train.{name}={getattr(self, name)!r} is not valid: it must be >= 0")
        if self.schedule == "inverse_sqrt" and self.lr_factor <= 0:
            raise ConfigError(f"train.lr_factor={self.lr_factor!r} is not valid: it must be > 0")
        if self.schedule == "cosine" and self.lr <= 0:
            raise ConfigError(f"train.lr={self.lr!r} is not valid: it must be > 0")


SECTIONS = ("model", "data", "train", "decode")


@dataclass(frozen=True)
class RunConfig:
    """Everything a training run reads: [model], [data], [train] and [decode] (validation and saved defaults).

    The model's vocab_size is not set here: it comes from the trained tokenizer.
    """

    model: ModelConfig
    data: DataConfig
    train: TrainConfig = TrainConfig()
    decode: DecodeConfig = DecodeConfig()

    def __post_init__(self) -> None:
        d, objective = self.data, self.objective
        needs = ({"seq2seq": "train_pairs" if d.train_pairs else "train_src", "lm": "train_text", "mlm": "train_text", "span_corruption": "train_text",
                  "classify": "train_images" if d.train_images else "train_tsv"}[objective], OBJECTIVE_ARCHS[objective])
        if (d.train_images is not None) != (self.model.vision is not None) and self.train.init_from is None:
            raise ConfigError("data.train_images needs an image encoder ([model.vision]), and an image encoder needs "
                              "data.train_images: set both or neither")
        if getattr(d, needs[0]) is None:
            raise ConfigError(f"train.objective={objective!r} trains on data.{needs[0]}"
                              + ("/train_tgt" if needs[0] == "train_src" else "") + ": set it")
        if d.bpe_dropout and objective not in ("seq2seq", "lm"):
            raise ConfigError(f"data.bpe_dropout is for objectives seq2seq and lm, not {objective!r}: "
                              "set data.bpe_dropout = 0")
        if self.train.freeze_encoder and (objective != "classify" or self.train.init_from is None):
            raise ConfigError("train.freeze_encoder is for objective = \"classify\" with train.init_from "
                              "(a pretrained encoder under a new head)")
        if self.train.init_from is None:
            if self.model.arch != needs[1]:
                raise ConfigError(f"model.arch={self.model.arch!r} cannot be trained with objective {objective!r} "
                                  f"(data.{needs[0]}): use arch = \"{needs[1]}\"")
            if self.data.max_len > self.model.max_positions and self.model.positional in ("sinusoidal", "learned") \
                    and self.model.vision is None:
                raise ConfigError(f"data.max_len={self.data.max_len} exceeds model.max_positions={self.model.max_positions}: "
                                  "lower data.max_len or raise model.max_positions")

    @property
    def objective(self) -> str:
        """train.objective, or when unset: seq2seq for aligned files, classify for a TSV, and for
        train_text lm (arch = "decoder") or mlm (arch = "encoder")."""
        if self.train.objective is not None:
            return self.train.objective
        if self.data.is_translation:
            return "seq2seq"
        if self.data.train_tsv is not None or self.data.train_images is not None:
            return "classify"
        return "mlm" if self.model.arch == "encoder" else "lm"

    def to_dict(self) -> dict[str, dict[str, Any]]:
        model = self.model.to_dict()
        for key in ("vocab_size", "tgt_vocab_size"):  # set by the tokenizer
            model.pop(key)
        return {"model": model, "data": dataclasses.asdict(self.data),
                "train": dataclasses.asdict(self.train), "decode": self.decode.to_dict()}

    def to_toml(self) -> str:
        """The resolved config as TOML (None values are written as comments: they mean the default)."""
        lines = []
        for section, values in self.to_dict().items():
            lines.append(f"[{section}]")
            for key, value in values.items():
                lines.append(f"# {key} is unset" if value is None else f"{key} = {_toml_value(value)}")
            lines.append("")
        return "\n".join(lines)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):  # a nested config, as an inline table
        return "{" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items() if v is not None) + "}"
    raise TypeError(f"cannot write {value!r} to TOML")


def parse_override(text: str) -> tuple[str, str, Any]:
    """'section.key=value' -> (section, key, value); the value is read as a TOML literal, else as a string."""
    if "=" not in text or "." not in text.split("=", 1)[0]:
        raise ConfigError(f"--set {text!r} is not valid: write section.key=value, e.g. --set train.max_steps=1000")
    name, raw = text.split("=", 1)
    section, key = name.strip().split(".", 1)
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()  # a bare word or path: take it as a string
    return section, key, value


def build_run_config(values: dict[str, Any], source: str = "config") -> RunConfig:
    """Build a RunConfig from nested dicts (parsed TOML), rejecting unknown sections and keys."""
    for section in values:
        if section not in SECTIONS:
            close = difflib.get_close_matches(section, SECTIONS, n=1)
            hint = f" (did you mean [{close[0]}]?)" if close else ""
            raise ConfigError(f"{source}: unknown section [{section}]{hint}; valid sections: {', '.join(SECTIONS)}")
        if not isinstance(values[section], dict):
            raise ConfigError(f"{source}: {section} must be a [{section}] table of key = value lines")
    data = _section(DataConfig, values.get("data", {}))
    model_values = dict(values.get("model", {}))
    for key in ("vocab_size", "tgt_vocab_size"):
        if key in model_values:
            raise ConfigError(f"{source}: model.{key} is set by the trained tokenizer: set data.vocab_size instead")
    model_values["vocab_size"] = data.vocab_size
    model = ModelConfig.from_dict(model_values)
    return RunConfig(model=model, data=data, train=_section(TrainConfig, values.get("train", {})),
                     decode=DecodeConfig.from_dict(values.get("decode", {})))


def _section(cls: type, values: dict[str, Any]) -> Any:
    return from_values(cls, values, {DataConfig: "data", TrainConfig: "train"}[cls])


def load_config(path: str, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """Read a training config (TOML), apply `section.key=value` overrides in order, validate."""
    if isinstance(overrides, str):
        raise TypeError(f"overrides is a list of 'section.key=value' strings, not one str: pass [{overrides!r}]")
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"{file} not found: pass a TOML config file (see configs/ for presets)")
    try:
        values = tomllib.loads(file.read_text(encoding="utf-8-sig"))  # a byte-order mark (Windows editors) is fine
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{file} is not valid TOML: {e}") from None
    for text in overrides:
        section, key, value = parse_override(text)
        table = values.setdefault(section, {})
        *parents, last = key.split(".")  # model.vision.patch_size: a key of the nested [model.vision] table
        for name in parents:
            table = table.setdefault(name, {})
            if not isinstance(table, dict):
                raise ConfigError(f"--set {text!r}: {section}.{name} is not a table")
        table[last] = value
    try:
        return build_run_config(values, source=str(file))
    except (ConfigError, TypeError) as e:
        message = str(e)
        raise ConfigError(message if message.startswith(str(file)) else f"{file}: {message}") from None


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

__all__ = ["ConfigError", "DataConfig", "DecodeConfig", "ModelConfig", "PRESETS", "RunConfig", "TrainConfig",
           "VisionConfig",
           "load_config", "cpu_small", "cpu_tiny", "paper_base", "paper_big",
           "unknown_key_error"]
