"""The stacks the model families are built of (§3.1): token embeddings with positions, the encoder,
the image encoder (ViT's patch front end), the audio encoder (Whisper's convolutions), and the
decoder with its KV cache bookkeeping.

Legend (model/__init__.py): B batch, S source length, T target length, L length of either side's
sequence, H heads, C d_model, P patches, F audio frames; N sentences and G beams per sentence in a
prefix-tree cache. Token masks are (B, L) booleans, True = real token.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from .audio import AudioFrontEnd
from .cache import KVCache
from .layers import DecoderLayer, EncoderLayer, dropped
from .masks import attention_mask, causal_mask, positions_from_mask
from .patches import PatchEmbedding
from .positional import RelativePositionBias, reads_back


class Stack(nn.Module):
    """What every stack shares: `recompute` (off unless training sets it: train.recompute) runs
    each layer under activation checkpointing (Chen et al. 2016, "Training Deep Nets with Sublinear
    Memory Cost"): in training, only each layer's input is kept for the backward pass and the
    layer's inside is computed again there, a forward pass more for a fraction of the activation
    memory. Dropout draws the same masks both times (torch saves and restores the RNG state)."""

    recompute = False

    def run(self, layer: nn.Module, *args):
        """layer(*args), checkpointed when recompute is on and a gradient is being taken."""
        if self.recompute and self.training and torch.is_grad_enabled():
            return checkpoint(layer, *args, use_reentrant=False)
        return layer(*args)


class Embeddings(nn.Module):
    """Token embedding x sqrt(d_model) (§3.4) + position encoding (§3.5) [+ token type] [->
    LayerNorm] -> dropout."""

    def __init__(
        self,
        tokens: nn.Embedding,
        positions: nn.Module | None,
        scale: float,
        dropout: float,
        token_types: nn.Embedding | None = None,
        norm: nn.Module | None = None,
    ):
        super().__init__()
        self.tokens = tokens
        self.positions = positions
        self.scale = scale
        self.token_types = token_types
        self.norm = norm
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, ids: torch.Tensor, positions: torch.Tensor, token_type_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        """ids, positions (B, L) -> (B, L, C)."""
        vocab = self.tokens.num_embeddings
        # not on a GPU while training: ids made by the run's own tokenizer, which sized the model
        if reads_back(ids, self.training) and ids.numel():
            low, high = (int(v) for v in torch.aminmax(ids))
            if low < 0 or high >= vocab:  # a clear error, not an index error deep inside torch
                raise ValueError(
                    f"token id {low if low < 0 else high} is outside the vocabulary [0, {vocab}): "
                    "check that the tokenizer matches the model"
                )
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


def _padded(mask: torch.Tensor | None, training: bool) -> bool:
    """Whether a token mask may hide anything (T5's bias is then one per row). Reading the mask
    back waits for a GPU: where reads_back says not to, any mask counts as hiding something
    (per-row biases are right either way)."""
    if mask is None:
        return False
    return not reads_back(mask, training) or not bool(mask.all())


def _relative_bias(
    relative: RelativePositionBias | None, query: torch.Tensor, key: torch.Tensor, masked: bool
) -> torch.Tensor | None:
    """T5's bias (B, H, T, S) from query positions (B, T) and key positions (B, S) (or (B, T, S));
    one (1, H, T, S) for the whole batch when nothing is masked (every row then has the same
    positions)."""
    if relative is None:
        return None
    if not masked:
        query, key = query[:1], key[:1]
    if key.dim() == 2:
        key = key[:, None, :]
    return relative(key - query[:, :, None])


class Encoder(Stack):
    """Embeddings, a stack of encoder layers, and an optional final norm; with `relative`, T5's
    relative position bias (bidirectional), computed once and added in every layer's
    self-attention."""

    def __init__(
        self,
        embed: Embeddings,
        layers: list[EncoderLayer],
        final_norm: nn.Module | None,
        relative: RelativePositionBias | None = None,
    ):
        super().__init__()
        self.embed = embed
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm
        self.relative = relative

    def forward(
        self,
        ids: torch.Tensor,
        mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        need_weights: bool = False,
    ):
        """ids (B, S), mask (B, S) -> (B, S, C); with need_weights also a list of (B, H, S, S) per
        layer."""
        b, s = ids.shape
        positions = _positions(mask, b, s, ids.device)
        x = self.embed(ids, positions, token_type_ids)
        attn_mask = attention_mask(mask, s)  # (B, 1, 1, S) or None
        bias = None  # (B or 1, H, S, S): T5's bias
        if self.relative is not None:
            bias = _relative_bias(self.relative, positions, positions, _padded(mask, self.training))
        weights = []
        for layer in self.layers:
            x, w = self.run(layer, x, attn_mask, positions, need_weights, bias)
            weights.append(w)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return (x, weights) if need_weights else x


class ImageEncoder(Stack):
    """The encoder with a patch front end (ViT): PatchEmbedding, encoder layers, an optional final
    norm.

    No padding: every image has 1 + P positions ([CLS] and the patches)."""

    def __init__(
        self, patches: PatchEmbedding, layers: list[EncoderLayer], final_norm: nn.Module | None
    ):
        super().__init__()
        self.patches = patches
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm

    def forward(self, pixels: torch.Tensor, need_weights: bool = False):
        """pixels (B, channels, height, width) -> (B, 1 + P, C); with need_weights also a list of
        (B, H, 1 + P, 1 + P) per layer."""
        x = self.patches(pixels)
        weights = []
        for layer in self.layers:
            x, w = self.run(layer, x, None, None, need_weights)
            weights.append(w)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return (x, weights) if need_weights else x


class AudioEncoder(Stack):
    """The encoder with a speech front end (Whisper): AudioFrontEnd, encoder layers, an optional
    final norm."""

    def __init__(
        self, front: AudioFrontEnd, layers: list[EncoderLayer], final_norm: nn.Module | None
    ):
        super().__init__()
        self.front = front
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm

    def forward(
        self, features: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False
    ):
        """features (B, n_mels, F), frame mask (B, F) or None -> (B, L, C) and the positions'
        mask (B, L) or None; with need_weights also a list of (B, H, L, L) per layer."""
        x, mask = self.front(features, mask)
        attn_mask = attention_mask(mask, x.size(1))  # (B, 1, 1, L) or None
        weights = []
        for layer in self.layers:
            x, w = self.run(layer, x, attn_mask, None, need_weights)
            weights.append(w)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return (x, mask, weights) if need_weights else (x, mask)


class Decoder(Stack):
    """Embeddings, a stack of decoder layers (with or without cross-attention), and an optional
    final norm; with `relative`, T5's causal relative position bias on every layer's
    self-attention."""

    def __init__(
        self,
        embed: Embeddings,
        layers: list[DecoderLayer],
        final_norm: nn.Module | None,
        relative: RelativePositionBias | None = None,
    ):
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
        if cache is None:
            positions, key_mask, offset, tree_mask = (
                _positions(mask, b, t, ids.device),
                mask,
                0,
                None,
            )
        else:
            positions, key_mask, offset, tree_mask = _advance(
                cache, ids, mask, memory, memory_mask, need_weights
            )
            memory_mask = cache.memory_mask
        self_mask, is_causal = _self_mask(key_mask, tree_mask, t, offset, ids.device)
        cross_mask = attention_mask(memory_mask, t)  # (B, 1, 1, S) or None
        bias = (
            None
            if self.relative is None
            else self._bias(positions, mask, cache, tree_mask is not None)
        )
        x = self.embed(ids, positions)
        self_weights, cross_weights = [], []
        for i, layer in enumerate(self.layers):
            layer_cache = cache.layers[i] if cache is not None else None
            x, (sw, cw) = self.run(
                layer,
                x,
                self_mask,
                is_causal,
                positions,
                memory,
                cross_mask,
                layer_cache,
                need_weights,
                1 if cache is None else cache.group_size,
                1 if cache is None else cache.tree_group,
                bias,
            )
            self_weights.append(sw)
            cross_weights.append(cw)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return (x, {"self": self_weights, "cross": cross_weights}) if need_weights else x

    def _bias(
        self, positions: torch.Tensor, mask: torch.Tensor | None, cache: KVCache | None, tree: bool
    ) -> torch.Tensor:
        """The relative bias of the new queries (positions (B, T)) against every key they attend to.

        A cached key's position is its count of real keys before it: the cache may hold padding
        between a row's keys (a left-padded prompt; beams' paths of different lengths after a
        prefix tree is flattened), and a prefix tree's cells are not in any one beam's order.
        """
        if cache is None:
            return _relative_bias(self.relative, positions, positions, _padded(mask, self.training))
        if tree:  # (N, G, S_cells) paths; one query per beam
            n, g, _ = cache.ancestors.shape
            keys = cache.ancestors.long().cumsum(-1) - 1
            return self.relative(keys - positions.reshape(n, g)[:, :, None])  # (N, H, G, S_cells)
        if cache.key_mask is None:  # every cached key is real: slot = position
            keys = torch.arange(cache.length, device=positions.device)[None]
        else:
            keys = cache.key_mask.long().cumsum(-1) - 1
        return _relative_bias(
            self.relative, positions, keys, masked=True
        )  # per row: no check, no sync


def _advance(
    cache: KVCache,
    ids: torch.Tensor,
    mask: torch.Tensor | None,
    memory: torch.Tensor | None,
    memory_mask: torch.Tensor | None,
    need_weights: bool,
):
    """Move the cache on by the T new positions of ids (B, T): their positions (B, T), the keys'
    token mask (B, offset + T) or None, the count of cached positions before them (offset), and a
    prefix tree's mask (N, 1, G, S_cells) or None. Keeps the source mask in the cache."""
    b, t = ids.shape
    tree_mask = None
    if cache.ancestors is not None and (t != 1 or mask is not None or need_weights):
        cache.flatten()  # a prefix tree takes one real token per beam and gives no per-row weights
    if memory is not None:  # the first step: keep the source mask, None when nothing is padded
        cache.memory_mask = None if memory_mask is None or bool(memory_mask.all()) else memory_mask
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
    if tree_mask is None:
        cache.length += t
    return positions, cache.key_mask, offset, tree_mask


def _self_mask(
    key_mask: torch.Tensor | None, tree_mask: torch.Tensor | None, t: int, offset: int, device
) -> tuple[torch.Tensor | None, bool]:
    """The decoder's self-attention mask and is_causal: causal, and hiding padded keys when there
    are any (key_mask (B, offset + T)); a prefix tree's mask as it is."""
    if tree_mask is not None:
        return tree_mask, False
    if key_mask is not None:
        return attention_mask(key_mask, t, causal=True), False
    if offset == 0:
        return None, t > 1
    if t == 1:
        return None, False  # one new query may see every cached key
    return causal_mask(t, offset=offset, device=device)[None, None], False
