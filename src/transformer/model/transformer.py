"""The stacks and the three model families, and `build_model`, the one place that reads ModelConfig.

Legend: B batch, S source length, T target length, L any length, C d_model, V vocabulary.
Token masks are (B, L) booleans, True = real token; the families' entry points also take integer
0/1 masks (Hugging Face's `attention_mask`) and check both (masks.as_token_mask).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..config import GATED_ACTIVATIONS, ModelConfig
from .attention import MultiHeadAttention
from .cache import KVCache
from .layers import DecoderLayer, EncoderLayer, FeedForward, activate, dropped, make_norm
from .linear import linear
from .masks import as_token_mask, attention_mask, causal_mask, padding_mask, positions_from_mask
from .patches import PatchEmbedding
from .positional import LearnedPositions, RelativePositionBias, RotaryEmbedding, SinusoidalPositions


class Embeddings(nn.Module):
    """Token embedding x sqrt(d_model) (§3.4) + position encoding (§3.5) [+ token type] [-> LayerNorm] -> dropout."""

    def __init__(self, tokens: nn.Embedding, positions: nn.Module | None, scale: float, dropout: float,
                 token_types: nn.Embedding | None = None, norm: nn.Module | None = None):
        super().__init__()
        self.tokens = tokens
        self.positions = positions
        self.scale = scale
        self.token_types = token_types
        self.norm = norm
        self.dropout = nn.Dropout(dropout)

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """ids, positions (B, L) -> (B, L, C)."""
        vocab = self.tokens.num_embeddings
        if ids.numel():
            low, high = (int(v) for v in torch.aminmax(ids))
            if low < 0 or high >= vocab:  # a clear error instead of an index error deep inside torch
                raise ValueError(f"token id {low if low < 0 else high} is outside the vocabulary [0, {vocab}): "
                                 "check that the tokenizer matches the model")
        x = self.tokens(ids)
        if self.scale != 1.0:
            x = x * self.scale
        if self.positions is not None:
            x = x + self.positions(positions).to(x.dtype)
        if self.token_types is not None:
            types = torch.zeros_like(ids) if token_type_ids is None else token_type_ids
            x = x + self.token_types(types)
        if self.norm is not None:
            x = self.norm(x)
        return dropped(self.dropout, x)


def _positions(mask: torch.Tensor | None, b: int, length: int, device) -> torch.Tensor:
    if mask is not None:
        return positions_from_mask(mask)
    return torch.arange(length, device=device).expand(b, length)


def _padded(mask: torch.Tensor | None) -> bool:
    return mask is not None and not bool(mask.all())


def _relative_bias(relative: RelativePositionBias | None, query: torch.Tensor, key: torch.Tensor,
                   masked: bool) -> torch.Tensor | None:
    """T5's bias (B, H, T, S) from query positions (B, T) and key positions (B, S) (or (B, T, S)); one
    (1, H, T, S) for the whole batch when nothing is masked (every row then has the same positions)."""
    if relative is None:
        return None
    if not masked:
        query, key = query[:1], key[:1]
    if key.dim() == 2:
        key = key[:, None, :]
    return relative(key - query[:, :, None])


class Encoder(nn.Module):
    """Embeddings, N encoder layers, and an optional final norm; with `relative`, T5's relative
    position bias (bidirectional), computed once and added in every layer's self-attention."""

    def __init__(self, embed: Embeddings, layers: list[EncoderLayer], final_norm: nn.Module | None,
                 relative: RelativePositionBias | None = None):
        super().__init__()
        self.embed = embed
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm
        self.relative = relative

    def forward(self, ids: torch.Tensor, mask: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None,
                need_weights: bool = False):
        """ids (B, S), mask (B, S) -> (B, S, C); with need_weights also a list of (B, H, S, S) per layer."""
        b, s = ids.shape
        positions = _positions(mask, b, s, ids.device)
        x = self.embed(ids, positions, token_type_ids)
        attn_mask = attention_mask(mask, s)  # (B, 1, 1, S) or None
        bias = _relative_bias(self.relative, positions, positions, _padded(mask))  # (B or 1, H, S, S) or None
        weights = []
        for layer in self.layers:
            x, w = layer(x, attn_mask, positions, need_weights, bias)
            weights.append(w)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return (x, weights) if need_weights else x


class ImageEncoder(nn.Module):
    """The encoder with a patch front end (ViT): PatchEmbedding, N encoder layers, an optional final norm.

    No padding: every image has 1 + N positions ([CLS] and the patches)."""

    def __init__(self, patches: PatchEmbedding, layers: list[EncoderLayer], final_norm: nn.Module | None):
        super().__init__()
        self.patches = patches
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm

    def forward(self, pixels: torch.Tensor, need_weights: bool = False):
        """pixels (B, C, H, W) -> (B, 1 + N, D); with need_weights also a list of (B, H, 1 + N, 1 + N) per layer."""
        x = self.patches(pixels)
        weights = []
        for layer in self.layers:
            x, w = layer(x, None, None, need_weights)
            weights.append(w)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return (x, weights) if need_weights else x


class Decoder(nn.Module):
    """Embeddings, N decoder layers (with or without cross-attention), and an optional final norm;
    with `relative`, T5's causal relative position bias on every layer's self-attention."""

    def __init__(self, embed: Embeddings, layers: list[DecoderLayer], final_norm: nn.Module | None,
                 relative: RelativePositionBias | None = None):
        super().__init__()
        self.embed = embed
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm
        self.relative = relative

    def forward(
        self,
        ids: torch.Tensor,
        mask: torch.Tensor | None = None,
        memory: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
        need_weights: bool = False,
    ):
        """ids (B, T), mask (B, T), memory (B, S, C), memory_mask (B, S) -> (B, T, C).

        With a cache, ids are the new positions only; keys/values of earlier positions come
        from the cache and the new ones are appended to it. With need_weights, also returns
        {"self": [(B, H, T, T') per layer], "cross": [(B, H, T, S) per layer]}.
        """
        b, t = ids.shape
        tree_mask = None
        if cache is None:
            positions = _positions(mask, b, t, ids.device)
            key_mask, offset = mask, 0
        else:
            if cache.ancestors is not None and (t != 1 or mask is not None or need_weights):
                cache.flatten()  # a prefix tree takes one real token per beam and gives no per-row weights
            if memory is not None:  # the first step: keep the source mask, None when nothing is padded
                cache.memory_mask = None if memory_mask is None or bool(memory_mask.all()) else memory_mask
            memory_mask = cache.memory_mask
            if cache.positions is None:
                cache.positions = torch.zeros(b, dtype=torch.long, device=ids.device)
            if mask is None:  # every new position is a real token
                steps = torch.arange(t, device=ids.device) if t > 1 else 0
                positions = cache.positions[:, None] + steps  # (B, T)
                cache.positions = cache.positions + t
            else:
                positions = cache.positions[:, None] + positions_from_mask(mask)  # (B, T)
                cache.positions = cache.positions + mask.sum(-1)
            offset = cache.length
            if cache.ancestors is not None:
                tree_mask = cache.grow_tree()  # (N, 1, G, S_cells): each beam sees its path
            elif mask is not None or cache.key_mask is not None:
                past = cache.key_mask
                if past is None:
                    past = torch.ones(b, offset, dtype=torch.bool, device=ids.device)
                new = mask if mask is not None else torch.ones(b, t, dtype=torch.bool, device=ids.device)
                cache.key_mask = torch.cat([past, new], dim=1)  # (B, offset + T)
            key_mask = cache.key_mask
            if tree_mask is None:
                cache.length += t
        # Self-attention mask: causal, and hiding padded keys when there are any.
        if tree_mask is not None:
            self_mask, is_causal = tree_mask, False
        elif key_mask is not None:
            self_mask, is_causal = attention_mask(key_mask, t, causal=True), False
        elif offset == 0:
            self_mask, is_causal = None, t > 1
        elif t == 1:
            self_mask, is_causal = None, False  # one new query may see every cached key
        else:
            self_mask, is_causal = causal_mask(t, offset=offset, device=ids.device)[None, None], False
        cross_mask = attention_mask(memory_mask, t)  # (B, 1, 1, S) or None
        bias = None if self.relative is None else self._bias(positions, mask, cache, tree_mask is not None)
        x = self.embed(ids, positions)
        self_weights, cross_weights = [], []
        for i, layer in enumerate(self.layers):
            layer_cache = cache.layers[i] if cache is not None else None
            x, (sw, cw) = layer(x, self_mask, is_causal, positions, memory, cross_mask, layer_cache, need_weights,
                                1 if cache is None else cache.group_size, 1 if cache is None else cache.tree_group,
                                bias)
            self_weights.append(sw)
            cross_weights.append(cw)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return (x, {"self": self_weights, "cross": cross_weights}) if need_weights else x

    def _bias(self, positions: torch.Tensor, mask: torch.Tensor | None, cache: KVCache | None,
              tree: bool) -> torch.Tensor:
        """The relative bias of the new queries (positions (B, T)) against every key they attend to.

        A cached key's position is its count of real keys before it: the cache may hold padding
        between a row's keys (a left-padded prompt; beams' paths of different lengths after a
        prefix tree is flattened), and a prefix tree's cells are not in any one beam's order.
        """
        if cache is None:
            return _relative_bias(self.relative, positions, positions, _padded(mask))
        if tree:  # (N, G, S_cells) paths; one query per beam
            n, g, _ = cache.ancestors.shape
            keys = cache.ancestors.long().cumsum(-1) - 1
            return self.relative(keys - positions.reshape(n, g)[:, :, None])  # (N, H, G, S_cells)
        if cache.key_mask is None:  # every cached key is real: slot = position
            keys = torch.arange(cache.length, device=positions.device)[None]
        else:
            keys = cache.key_mask.long().cumsum(-1) - 1
        return _relative_bias(self.relative, positions, keys, masked=True)  # per row: no check, no sync


def _output_scale(cfg: ModelConfig, hidden: torch.Tensor) -> torch.Tensor:
    """T5 v1.0 scales the decoder's last state by d_model^-1/2 before its tied output layer (scale_output)."""
    return hidden * cfg.d_model ** -0.5 if cfg.scale_output else hidden


class EncoderDecoder(nn.Module):
    """The paper's model (Figure 1): encode the source once, decode the target with teacher forcing or step by step."""

    def __init__(self, config: ModelConfig, encoder: Encoder, decoder: Decoder, lm_head: nn.Linear):
        super().__init__()
        self.config = config
        self.encoder = encoder
        self.decoder = decoder
        self.lm_head = lm_head

    def encode(self, src_ids: torch.Tensor, src_mask: torch.Tensor | None = None, need_weights: bool = False):
        """(B, S) -> memory (B, S, C) and the source mask (B, S) (computed from pad_id when omitted)."""
        src_mask = as_token_mask(src_mask, src_ids.shape, "src_mask")
        if src_mask is None:
            src_mask = padding_mask(src_ids, self.config.pad_id)
        out = self.encoder(src_ids, src_mask, need_weights=need_weights)
        if need_weights:
            memory, weights = out
            return memory, src_mask, weights
        return out, src_mask

    def decode(self, tgt_ids: torch.Tensor, memory: torch.Tensor | None, src_mask: torch.Tensor | None,
               tgt_mask: torch.Tensor | None = None, cache: KVCache | None = None, need_weights: bool = False):
        """(B, T) target ids over memory -> logits (B, T, V) (and attention weights with need_weights)."""
        tgt_mask = as_token_mask(tgt_mask, tgt_ids.shape, "tgt_mask")
        if memory is not None:
            src_mask = as_token_mask(src_mask, memory.shape[:2], "src_mask")
        out = self.decoder(tgt_ids, tgt_mask, memory, src_mask, cache, need_weights)
        if need_weights:
            return linear(self.lm_head, _output_scale(self.config, out[0])), out[1]
        return linear(self.lm_head, _output_scale(self.config, out))

    def new_cache(self) -> KVCache:
        return KVCache.empty(len(self.decoder.layers))

    def forward(self, src_ids: torch.Tensor, tgt_ids: torch.Tensor, src_mask: torch.Tensor | None = None,
                tgt_mask: torch.Tensor | None = None) -> torch.Tensor:
        """src (B, S), tgt (B, T) -> logits (B, T, V). Position t sees tgt[:, :t+1] and the whole source."""
        memory, src_mask = self.encode(src_ids, src_mask)
        return self.decode(tgt_ids, memory, src_mask, tgt_mask)


class DecoderOnly(nn.Module):
    """A language model (GPT, Llama): masked self-attention only; returns next-token logits."""

    def __init__(self, config: ModelConfig, decoder: Decoder, lm_head: nn.Linear):
        super().__init__()
        self.config = config
        self.decoder = decoder
        self.lm_head = lm_head

    def new_cache(self) -> KVCache:
        return KVCache.empty(len(self.decoder.layers))

    def forward(self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None, cache: KVCache | None = None,
                need_weights: bool = False, last_only: bool = False):
        """ids (B, T), attention_mask (B, T) (None = no padding) -> logits (B, T, V).

        With a cache, ids are the new tokens only (a left-padded prompt first, then one token per step).
        last_only: logits (B, 1, V) of the last position only (a prompt's next token), skipping
        the output layer for the others.
        """
        attention_mask = as_token_mask(attention_mask, ids.shape, "attention_mask")
        out = self.decoder(ids, attention_mask, cache=cache, need_weights=need_weights)
        hidden = _output_scale(self.config, out[0] if need_weights else out)
        if last_only:
            hidden = hidden[:, -1:]
        if need_weights:
            return linear(self.lm_head, hidden), out[1]
        return linear(self.lm_head, hidden)


class MaskedLMHead(nn.Module):
    """BERT's masked-LM head: dense -> activation -> LayerNorm -> vocabulary projection (tied or not) + bias."""

    def __init__(self, d_model: int, vocab_size: int, activation: str, eps: float):
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)
        self.activation = GATED_ACTIVATIONS.get(activation, activation)  # a gated FFN's gate activation
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.decoder = nn.Linear(d_model, vocab_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """(B, L, C) -> (B, L, V)."""
        h = activate(self.dense(hidden), self.activation)
        return self.decoder(self.norm(h))


class PooledClassifier(nn.Module):
    """Pool the hidden states (the first token's, [CLS], or the mean over real tokens), then BERT's
    pooler (dense + tanh, optional) and a classifier (optional) on top."""

    def __init__(self, d_model: int, n_classes: int, dropout: float, pooling: str = "first", dense: bool = True):
        super().__init__()
        self.pooling = pooling
        self.dense = nn.Linear(d_model, d_model) if dense else None
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(d_model, n_classes) if n_classes else None

    def pool(self, hidden: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """(B, L, C), mask (B, L) True at real tokens (None = all real) -> (B, C)."""
        if self.pooling == "first":
            pooled = hidden[:, 0]
        elif mask is None:
            pooled = hidden.mean(dim=1)
        else:
            weights = mask.to(hidden.dtype).unsqueeze(-1)  # (B, L, 1)
            pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
        return torch.tanh(self.dense(pooled)) if self.dense is not None else pooled

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """(B, L, C) -> (B, n_classes) logits, or the pooled (B, C) when there is no classifier."""
        pooled = self.pool(hidden, mask)
        return pooled if self.classifier is None else self.classifier(dropped(self.dropout, pooled))


class EncoderOnly(nn.Module):
    """A bidirectional encoder (BERT): returns hidden states; the heads are separate modules."""

    def __init__(self, config: ModelConfig, encoder: Encoder, mlm_head: MaskedLMHead | None = None,
                 pooler: PooledClassifier | None = None):
        super().__init__()
        self.config = config
        self.encoder = encoder
        self.mlm_head = mlm_head
        self.pooler = pooler

    def forward(self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, need_weights: bool = False):
        """ids (B, L), attention_mask (B, L) (None = no padding) -> hidden states (B, L, C).
        An image encoder (config.vision) takes pixels (B, C, H, W) instead of ids, and no mask."""
        if isinstance(self.encoder, ImageEncoder):
            if attention_mask is not None or token_type_ids is not None:
                raise ValueError("an image encoder takes pixels only: no attention_mask or token_type_ids")
            return self.encoder(ids, need_weights)
        attention_mask = as_token_mask(attention_mask, ids.shape, "attention_mask")
        return self.encoder(ids, attention_mask, token_type_ids, need_weights)

    def classify(self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """ids (B, L), attention_mask (B, L) -> class logits (B, n_classes); or pixels (B, C, H, W) of an image encoder."""
        if self.pooler is None or self.pooler.classifier is None:
            raise ValueError("this encoder has no classifier (n_classes = 0): train one with objective = \"classify\"")
        if isinstance(self.encoder, ImageEncoder):
            return self.pooler(self(ids))
        mask = as_token_mask(attention_mask, ids.shape, "attention_mask")
        return self.pooler(self.encoder(ids, mask), mask)


Model = EncoderDecoder | EncoderOnly | DecoderOnly


# --------------------------------------------------------------------------------------------
# Building from a config


def _embeddings(cfg: ModelConfig, tokens: nn.Embedding, token_types: int = 0) -> Embeddings:
    match cfg.positional:
        case "sinusoidal":
            positions = SinusoidalPositions(cfg.d_model, cfg.max_positions, cfg.sinusoidal_layout)
        case "learned":
            positions = LearnedPositions(cfg.d_model, cfg.max_positions)
        case _:  # rope (applied inside attention) or none
            positions = None
    return Embeddings(
        tokens, positions,
        scale=math.sqrt(cfg.d_model) if cfg.scale_embedding else 1.0,
        dropout=cfg.dropout,
        token_types=nn.Embedding(token_types, cfg.d_model) if token_types else None,
        norm=make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, cfg.bias) if cfg.embedding_norm else None,
    )


def _attention(cfg: ModelConfig, rotary: RotaryEmbedding | None, cross: bool = False) -> MultiHeadAttention:
    return MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.kv_heads, cfg.bias, cfg.attention_dropout,
                              cfg.attention_impl, None if cross else rotary, cfg.d_k, cfg.d_v,
                              None if cfg.scale_attention else 1.0)


def _relative(cfg: ModelConfig, bidirectional: bool) -> RelativePositionBias | None:
    r = cfg.relative_bias
    return None if r is None else RelativePositionBias(cfg.n_heads, bidirectional, r.buckets, r.max_distance)


def _norm(cfg: ModelConfig) -> nn.Module:
    return make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, cfg.bias)


def _ffn(cfg: ModelConfig) -> FeedForward:
    return FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.bias, cfg.activation_dropout)


def _rotary(cfg: ModelConfig) -> RotaryEmbedding | None:
    return RotaryEmbedding(cfg.qk_dim, cfg.max_positions, cfg.rope_base) if cfg.positional == "rope" else None


def _encoder(cfg: ModelConfig, tokens: nn.Embedding) -> Encoder:
    rotary = _rotary(cfg)
    pre = cfg.norm_position == "pre"
    layers = [EncoderLayer(_attention(cfg, rotary), _ffn(cfg), _norm(cfg), _norm(cfg), cfg.dropout, pre)
              for _ in range(cfg.n_encoder_layers)]
    return Encoder(_embeddings(cfg, tokens, cfg.n_token_types), layers,
                   _norm(cfg) if cfg.use_final_norm else None, _relative(cfg, bidirectional=True))


def _image_encoder(cfg: ModelConfig) -> ImageEncoder:
    v = cfg.vision
    pre = cfg.norm_position == "pre"
    layers = [EncoderLayer(_attention(cfg, None), _ffn(cfg), _norm(cfg), _norm(cfg), cfg.dropout, pre)
              for _ in range(cfg.n_encoder_layers)]
    patches = PatchEmbedding(v.image_size, v.patch_size, v.channels, cfg.d_model, v.positions, cfg.dropout)
    return ImageEncoder(patches, layers, _norm(cfg) if cfg.use_final_norm else None)


def _decoder(cfg: ModelConfig, tokens: nn.Embedding, cross: bool) -> Decoder:
    rotary = _rotary(cfg)
    pre = cfg.norm_position == "pre"
    layers = [DecoderLayer(_attention(cfg, rotary), _attention(cfg, rotary, cross=True) if cross else None,
                           _ffn(cfg), _norm(cfg), _norm(cfg) if cross else None, _norm(cfg), cfg.dropout, pre)
              for _ in range(cfg.n_decoder_layers)]
    return Decoder(_embeddings(cfg, tokens), layers, _norm(cfg) if cfg.use_final_norm else None,
                   _relative(cfg, bidirectional=False))


def init_weights(model: nn.Module, cfg: ModelConfig) -> None:
    """Xavier-uniform linear layers (as the reference implementations do), zero biases, unit norms.

    Token embeddings (and an untied output layer) get N(0, d_model^-1/2) when embeddings are
    scaled by sqrt(d_model): the scaled embedding then has unit variance per component, the
    same scale as the sinusoids it is added to, and a tied output layer maps a normalised
    hidden state (unit variance per component) to logits of variance about 1, so training
    starts from a near-uniform distribution (loss ~ ln V) instead of a saturated softmax.
    Without scaling (GPT/BERT style) embeddings get N(0, 0.02).
    """
    std = cfg.d_model ** -0.5 if cfg.scale_embedding else 0.02
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=std)
    lm_head = getattr(model, "lm_head", None)
    if lm_head is not None and not cfg.tie_embeddings:
        nn.init.normal_(lm_head.weight, std=cfg.d_model ** -0.5)
    if not cfg.scale_attention:  # T5 folds 1 / sqrt(d_k) into the query projection's initialisation
        for module in model.modules():
            if isinstance(module, MultiHeadAttention):
                module.q_proj.weight.data.mul_(module.qk_dim ** -0.5)


def build_model(cfg: ModelConfig) -> Model:
    """Assemble the model that `cfg` describes; the only function that reads a ModelConfig."""
    if not isinstance(cfg, ModelConfig):
        raise TypeError(f"build_model takes a ModelConfig, not {type(cfg).__name__}: build one with "
                        "ModelConfig(...), a preset such as transformer.config.cpu_tiny(), or ModelConfig.from_dict(values)")
    match cfg.arch:
        case "encoder-decoder":
            src_tokens = nn.Embedding(cfg.vocab_size, cfg.d_model)
            tgt_tokens = src_tokens if cfg.shares_embeddings else nn.Embedding(cfg.target_vocab_size, cfg.d_model)
            lm_head = nn.Linear(cfg.d_model, cfg.target_vocab_size, bias=cfg.output_bias)
            model = EncoderDecoder(cfg, _encoder(cfg, src_tokens), _decoder(cfg, tgt_tokens, cross=True), lm_head)
        case "decoder":
            tokens = nn.Embedding(cfg.vocab_size, cfg.d_model)
            lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=cfg.output_bias)
            model = DecoderOnly(cfg, _decoder(cfg, tokens, cross=False), lm_head)
        case "encoder":
            pooler = PooledClassifier(cfg.d_model, cfg.n_classes, cfg.dropout, cfg.pooling, dense=cfg.pooler) \
                if cfg.pooler or cfg.n_classes else None
            if cfg.vision is not None:
                model = EncoderOnly(cfg, _image_encoder(cfg), None, pooler)
            else:
                tokens = nn.Embedding(cfg.vocab_size, cfg.d_model)
                mlm = MaskedLMHead(cfg.d_model, cfg.vocab_size, cfg.activation, cfg.norm_eps) if cfg.mlm_head else None
                model = EncoderOnly(cfg, _encoder(cfg, tokens), mlm, pooler)
        case _:
            raise ValueError(f"unknown arch {cfg.arch!r}")
    init_weights(model, cfg)
    tie_weights(model)
    return model


def tie_weights(model: Model) -> None:
    """Share the output projection with the target token embedding (§3.4) when the config says so."""
    if not model.config.tie_embeddings:
        return
    if isinstance(model, EncoderOnly):
        if model.mlm_head is not None:
            model.mlm_head.decoder.weight = model.encoder.embed.tokens.weight
        return
    model.lm_head.weight = model.decoder.embed.tokens.weight
