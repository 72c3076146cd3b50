"""The shape of a Transformer: ModelConfig and the choice lists of its settings. Its nested family
configs (vision, audio, detection, relative bias, contrastive) are families.py's, the paper's
presets (Table 3) presets.py's.

Every field carries a one-line doc. A config is validated when it is built, and an error
names the field, the bad value and what would be valid.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .checks import ConfigError, check_settings, check_types, from_values, setting
from .families import (
    POOLINGS,
    AudioConfig,
    ContrastiveConfig,
    DetectionConfig,
    RelativeBiasConfig,
    VisionConfig,
    check_contrastive,
    check_detection,
    text_tower_config,
)

ARCHS = ("encoder-decoder", "encoder", "decoder")
ATTENTION_IMPLS = ("auto", "fused", "textbook")
"""How attention is computed (transformer.runtime.precision chooses for auto)."""


POSITIONALS = ("sinusoidal", "learned", "rope", "t5_bias", "none")
NORM_POSITIONS = ("post", "pre")
NORMS = ("layernorm", "rmsnorm")
SINUSOIDAL_LAYOUTS = ("interleaved", "halves")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu", "swiglu", "geglu", "geglu_tanh")
GATED_ACTIVATIONS = {"swiglu": "silu", "geglu": "gelu", "geglu_tanh": "gelu_tanh"}
"""Gated feed-forward activations (Shazeer 2020) -> the activation of their gate."""


@dataclass(frozen=True)
class ModelConfig:
    """The shape of a Transformer. Defaults are the paper's base model (Table 3)."""

    arch: str = setting("encoder-decoder", choices=ARCHS)
    """encoder-decoder (the paper), encoder (BERT-style) or decoder (GPT/Llama-style)."""
    vocab_size: int = setting(37000, gt=0)
    """Token vocabulary; shared by source and target unless tgt_vocab_size is set."""
    tgt_vocab_size: int | None = setting(None, gt=0)
    """Target vocabulary of an encoder-decoder when it is separate (None = shared)."""
    d_model: int = setting(512, gt=0)
    """Width of every residual stream (§3)."""
    n_heads: int = setting(8, gt=0)
    """Attention heads h; each has d_model / n_heads dimensions (§3.2.2)."""
    n_kv_heads: int | None = setting(None, gt=0)
    """Key/value heads for grouped-query attention (None = n_heads, plain multi-head)."""
    d_k: int | None = setting(None, gt=0)
    """Size of each head's queries and keys (§3.2.1's d_k; None = d_model / n_heads). Values keep
    d_model / n_heads dimensions (d_v): the paper's Table 3 (B) shrinks d_k alone."""
    d_v: int | None = setting(None, gt=0)
    """Size of each head's values (None = d_model / n_heads); the heads then concatenate to n_heads
    * d_v before the output projection (T5 v1.1 small: 6 heads of 64 in a 512 model)."""
    n_encoder_layers: int = setting(6, ge=0)
    """Encoder layers N (ignored by decoder-only models)."""
    n_decoder_layers: int = setting(6, ge=0)
    """Decoder layers N (ignored by encoder-only models)."""
    d_ff: int = setting(2048, gt=0)
    """Inner width of the position-wise feed-forward network (§3.3)."""
    dropout: float = setting(0.1, ge=0, lt=1)
    """Dropout on each sub-layer output and on the embedding sums (§5.4, P_drop)."""
    attention_dropout: float = setting(0.0, ge=0, lt=1)
    """Dropout on the attention weights."""
    activation_dropout: float = setting(0.0, ge=0, lt=1)
    """Dropout inside the feed-forward network, after the activation."""
    norm_position: str = setting("post", choices=NORM_POSITIONS)
    """post: LayerNorm(x + Sublayer(x)) as in the paper; pre: x + Sublayer(LayerNorm(x))."""
    norm: str = setting("layernorm", choices=NORMS)
    """layernorm or rmsnorm."""
    norm_eps: float = setting(1e-5, gt=0)
    """Epsilon inside the norms."""
    final_norm: bool | None = None
    """A norm after the last layer of each stack (None = on for pre-norm, off for post-norm)."""
    positional: str = setting("sinusoidal", choices=POSITIONALS)
    """sinusoidal (§3.5), learned, rope (rotary, on queries and keys), t5_bias (T5's bucketed
    relative bias on the self-attention scores, model.relative_bias) or none (an image encoder takes
    model.vision.positions instead)."""
    max_positions: int = setting(1024, gt=0)
    """Longest sequence the position encoding covers."""
    rope_base: float = setting(10000.0, gt=0)
    """Base of the rotary frequencies."""
    sinusoidal_layout: str = setting("interleaved", choices=SINUSOIDAL_LAYOUTS)
    """interleaved: sin/cos alternate as in §3.5; halves: all sines then all cosines (Marian)."""
    activation: str = setting("relu", choices=ACTIVATIONS)
    """Feed-forward activation: relu (the paper), gelu, gelu_tanh (GPT-2), silu, or a gated one
    (Shazeer 2020: act(x W1) * x W3, a third matrix): swiglu (Llama), geglu, geglu_tanh (T5
    v1.1)."""
    bias: bool = True
    """Biases in the linear layers and LayerNorms."""
    output_bias: bool = False
    """A bias on the output projection (Marian's final_logits_bias)."""
    tie_embeddings: bool = True
    """Tie target embedding and output layer (§3.4); with a shared vocabulary, all three."""
    share_embeddings: bool | None = None
    """Encoder and decoder read one token embedding (None = when the vocabulary is shared and
    tie_embeddings is on). true with tie_embeddings = false: shared inputs, a separate output layer
    (T5 v1.1)."""
    scale_attention: bool = True
    """Divide the attention scores by sqrt(d_k) (§3.2.1). T5 does not: it folds the factor into its
    initialisation (false)."""
    scale_output: bool = False
    """Multiply the decoder's final state by d_model^-1/2 before the output layer (T5 v1.0, whose
    output layer is the tied embedding)."""
    scale_embedding: bool = True
    """Multiply token embeddings by sqrt(d_model) (§3.4)."""
    embedding_norm: bool = False
    """A LayerNorm on the summed embeddings (BERT)."""
    n_token_types: int = setting(0, ge=0)
    """Token-type (segment) embeddings of the encoder (BERT uses 2; 0 = none)."""
    mlm_head: bool = False
    """A masked-LM head on an encoder-only model (BERT pretraining)."""
    pooler: bool = False
    """BERT's pooler: a dense + tanh layer on the pooled hidden state of an encoder-only model."""
    pooling: str = setting("first", choices=POOLINGS)
    """What the pooler and classifier read: "first" (the first token's state, [CLS]: BERT's, the
    default) or "mean" (the mean over real tokens, as sentence-transformers and ViT variants do)."""
    n_classes: int = setting(0, ge=0)
    """Classes of a classifier on the pooled output of an encoder-only model (0 = none)."""
    span_head: bool = False
    """A span head on an encoder-only model (BERT for SQuAD): a start and an end logit per token,
    for extractive question answering."""
    sentence_head: bool = False
    """A sentence head on an encoder-only model (answer-sentence selection, heads.SentenceHead): a
    logit per sentence of the context from its embedding's cosine with the question's."""
    pad_id: int = setting(0, ge=0)
    """Padding token id; padding positions are never attended to on the source side."""
    bos_id: int = setting(2, ge=0)
    """Beginning-of-sequence token id."""
    eos_id: int = setting(3, ge=0)
    """End-of-sequence token id."""
    decoder_start_id: int | None = setting(None, ge=0)
    """First decoder input of an encoder-decoder (None = bos_id; Marian uses its pad id)."""
    attention_impl: str = setting("auto", choices=ATTENTION_IMPLS)
    """fused: torch's scaled_dot_product_attention; textbook: the explicit softmax(QK^T/sqrt(d))V;
    auto: fused, except that training measures both at its batch shape and takes the faster
    (transformer.runtime.precision)."""
    vision: VisionConfig | None = None
    """An image encoder (ViT): patches instead of token ids ([model.vision]); arch = "encoder" (an
    image classifier) or "encoder-decoder" (an image captioner: the text decoder cross-attends to
    the patches; positional is then the decoder's)."""
    audio: AudioConfig | None = None
    """A speech encoder (Whisper): log-mel frames instead of source token ids ([model.audio];
    arch = "encoder-decoder" only)."""
    detection: DetectionConfig | None = None
    """An object detector (DETR): an image backbone, object queries and box heads
    ([model.detection]; arch = "encoder-decoder" only)."""
    relative_bias: RelativeBiasConfig | None = None
    """T5's relative position bias ([model.relative_bias]); set (with defaults) when positional =
    "t5_bias"."""
    contrastive: ContrastiveConfig | None = None
    """A text-image dual encoder (CLIP): a text tower beside the image encoder, both projected to
    one embedding ([model.contrastive]; arch = "encoder" with [model.vision] only)."""

    def __post_init__(self) -> None:
        if isinstance(self.vision, dict):  # from JSON / TOML
            object.__setattr__(
                self, "vision", from_values(VisionConfig, self.vision, "model.vision")
            )
        if self.vision is not None and not isinstance(self.vision, VisionConfig):
            raise ConfigError(
                f"vision={self.vision!r} is not valid: give a [model.vision] table or a "
                "VisionConfig"
            )
        if isinstance(self.audio, dict):
            object.__setattr__(self, "audio", from_values(AudioConfig, self.audio, "model.audio"))
        if self.audio is not None and not isinstance(self.audio, AudioConfig):
            raise ConfigError(
                f"audio={self.audio!r} is not valid: give a [model.audio] table or an AudioConfig"
            )
        if isinstance(self.detection, dict):
            object.__setattr__(
                self, "detection", from_values(DetectionConfig, self.detection, "model.detection")
            )
        if self.detection is not None and not isinstance(self.detection, DetectionConfig):
            raise ConfigError(
                f"detection={self.detection!r} is not valid: give a [model.detection] table or a "
                "DetectionConfig"
            )
        if isinstance(self.relative_bias, dict):
            object.__setattr__(
                self,
                "relative_bias",
                from_values(RelativeBiasConfig, self.relative_bias, "model.relative_bias"),
            )
        if isinstance(self.contrastive, dict):
            object.__setattr__(
                self,
                "contrastive",
                from_values(ContrastiveConfig, self.contrastive, "model.contrastive"),
            )
        if self.contrastive is not None and not isinstance(self.contrastive, ContrastiveConfig):
            raise ConfigError(
                f"contrastive={self.contrastive!r} is not valid: give a [model.contrastive] table "
                "or a ContrastiveConfig"
            )
        if self.relative_bias is None and self.positional == "t5_bias":
            object.__setattr__(self, "relative_bias", RelativeBiasConfig())
        if self.relative_bias is not None and not isinstance(
            self.relative_bias, RelativeBiasConfig
        ):
            raise ConfigError(
                f"relative_bias={self.relative_bias!r} is not valid: give a [model.relative_bias] "
                "table or a RelativeBiasConfig"
            )
        if self.relative_bias is not None and self.positional != "t5_bias":
            raise ConfigError(
                f"model.relative_bias is set but positional={self.positional!r}: set positional = "
                '"t5_bias" to use it, or remove the [model.relative_bias] table'
            )
        check_types(self, None)
        check_settings(self, None)
        self._check_shape()
        self._check_heads()
        for name in ("pad_id", "bos_id", "eos_id", "decoder_start_id"):
            value = getattr(self, name)
            if value is not None and value >= self.vocab_size:
                raise ConfigError(
                    f"{name}={value} is outside the vocabulary (vocab_size={self.vocab_size})"
                )
        if self.share_embeddings and self.tgt_vocab_size is not None:
            raise ConfigError(
                "share_embeddings=true needs one vocabulary, but "
                f"tgt_vocab_size={self.tgt_vocab_size}: remove tgt_vocab_size or set "
                "share_embeddings = false"
            )

    def _check_shape(self) -> None:
        """Rules between the sizes, positions and family."""
        if self.tgt_vocab_size is not None:
            if self.arch != "encoder-decoder":
                raise ConfigError(
                    f"tgt_vocab_size={self.tgt_vocab_size} is only for arch='encoder-decoder'; "
                    f"leave it None for arch={self.arch!r}"
                )
        if self.arch in ("encoder-decoder", "encoder") and self.n_encoder_layers == 0:
            raise ConfigError(
                f"n_encoder_layers=0 is not valid for arch={self.arch!r}: it needs at least 1"
            )
        if self.arch in ("encoder-decoder", "decoder") and self.n_decoder_layers == 0:
            raise ConfigError(
                f"n_decoder_layers=0 is not valid for arch={self.arch!r}: it needs at least 1"
            )
        if self.d_v is None and self.d_model % self.n_heads:
            raise ConfigError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}: each head "
                "gets d_model / n_heads dimensions"
            )
        if self.n_kv_heads is not None:
            if self.n_heads % self.n_kv_heads:
                raise ConfigError(
                    f"n_kv_heads={self.n_kv_heads} does not divide n_heads={self.n_heads}: each "
                    "key/value head serves a whole group of query heads"
                )
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ConfigError(
                f"d_model={self.d_model} must be even for sinusoidal positions (sin/cos pairs)"
            )
        if self.positional == "rope" and self.qk_dim % 2:
            raise ConfigError(
                f"query/key dimension {self.qk_dim} (d_k, else d_model / n_heads) must be even for "
                "rope"
            )

    def _check_heads(self) -> None:
        """Rules of the encoder's heads and front ends."""
        if self.n_token_types and self.arch != "encoder":
            raise ConfigError(
                f"n_token_types={self.n_token_types} is only for arch='encoder' (BERT); set it to 0"
            )
        if (
            self.mlm_head or self.pooler or self.span_head or self.sentence_head
        ) and self.arch != "encoder":
            raise ConfigError(
                "mlm_head, pooler, span_head and sentence_head are heads of arch='encoder' "
                f"models, not of arch={self.arch!r}"
            )
        if self.sentence_head and (self.span_head or self.n_classes):
            raise ConfigError(
                "sentence_head is an answer head of its own: leave span_head at false and "
                "n_classes at 0"
            )
        if self.vision is not None:
            if self.arch not in ("encoder", "encoder-decoder"):
                raise ConfigError(
                    f"model.vision is for arch='encoder' (ViT) or 'encoder-decoder' (an image "
                    f"captioner), not arch={self.arch!r}"
                )
            if self.audio is not None:
                raise ConfigError(
                    "model.vision and model.audio are two front ends of one encoder: keep one"
                )
            if self.mlm_head or self.n_token_types or self.span_head or self.sentence_head:
                raise ConfigError(
                    "an image encoder (model.vision) has no masked-LM head, answer head or token "
                    "types: leave mlm_head, span_head, sentence_head and n_token_types at false "
                    "and 0"
                )
            if self.arch == "encoder" and self.vision.n_patches + 1 > self.max_positions:
                raise ConfigError(
                    f"{self.vision.n_patches} patches + [CLS] exceed "
                    f"max_positions={self.max_positions}"
                )
        if self.contrastive is not None:
            check_contrastive(self)
        if self.audio is not None:
            if self.arch != "encoder-decoder":
                raise ConfigError(
                    f"model.audio is for arch='encoder-decoder' (Whisper), not arch={self.arch!r}"
                )
            if self.relative_bias is not None or self.positional == "rope":
                raise ConfigError(
                    f"positional={self.positional!r} does not fit a speech model: its decoder "
                    'takes positional = "learned" or "sinusoidal" (the encoder takes '
                    "model.audio.positions)"
                )
        if self.detection is not None:
            check_detection(self)
        elif self.n_classes and self.arch != "encoder":
            raise ConfigError(
                f"n_classes={self.n_classes} is for arch='encoder' classifiers (or detectors, "
                f"model.detection), not arch={self.arch!r}"
            )

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

    def text_tower(self) -> ModelConfig:
        """A dual encoder's text tower: this config changed by model.contrastive.text_tower."""
        return text_tower_config(self)
