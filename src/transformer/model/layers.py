"""Position-wise feed-forward network (§3.3), norms, and the encoder and decoder layers (§3.1).

Legend (model/__init__.py): B batch, T target length, S source length, L either, C d_model,
H heads, K key/value heads, D head dim, d_ff the feed-forward width; N sentences and G beams per
sentence in a prefix-tree cache.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..config import GATED_ACTIVATIONS
from .attention import MultiHeadAttention
from .cache import LayerCache
from .linear import linear


class FeedForward(nn.Module):
    """FFN(x) = act(x W1 + b1) W2 + b2 (§3.3); gated (Shazeer 2020): (act(x W1) * x W3) W2, with
    act SiLU for swiglu (Llama), GELU for geglu and its tanh approximation for geglu_tanh (T5
    v1.1)."""

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        activation: str = "relu",
        bias: bool = True,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.activation = GATED_ACTIVATIONS.get(activation, activation)
        self.w1 = nn.Linear(d_model, d_ff, bias=bias)
        self.w3 = nn.Linear(d_model, d_ff, bias=bias) if activation in GATED_ACTIVATIONS else None
        self.w2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.w13: nn.Module | None = None
        """Inference only (model.quantize.fuse_projections): W1 and W3 in one product."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, L, C) -> (B, L, C)."""
        if self.w13 is not None:
            gate, up = linear(self.w13, x).chunk(2, dim=-1)
            h = activate(gate, self.activation) * up  # (B, L, d_ff)
        elif self.w3 is not None:
            h = activate(linear(self.w1, x), self.activation) * linear(self.w3, x)  # (B, L, d_ff)
        else:
            h = activate(linear(self.w1, x), self.activation)  # (B, L, d_ff)
        return linear(self.w2, dropped(self.dropout, h))


def dropped(dropout: nn.Dropout, x: torch.Tensor) -> torch.Tensor:
    """dropout(x), skipped outright where it is the identity (eval mode, p = 0): decoding calls it
    ~13 times a step. On the CPU through cpu_dropout (same distribution, a faster forward and
    backward: docs/benchmarks/training.md, "The CPU training step"), elsewhere (and inside
    torch.compile, which fuses it) nn.Dropout."""
    if not dropout.training or dropout.p == 0:
        return x
    if x.device.type == "cpu" and not torch.compiler.is_compiling():
        return cpu_dropout(x, dropout.p)
    return dropout(x)


KEEP_BITS = 15
"""Random bits per element in cpu_dropout: p is rounded to a multiple of 2^-15 (0.1 -> 0.100006)."""


def cpu_dropout(
    x: torch.Tensor, p: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Inverted dropout, x * keep / (1 - p) with keep ~ Bernoulli(1 - p), for the CPU.

    torch's CPU dropout draws each element with bernoulli_ and keeps a mask in x's dtype for the
    backward pass. Here one 64-bit draw of the generator (torch's default unless given: seeding
    and exact resume work as before) gives four elements 15 random bits each, compared with
    round(p * 2^15): a quarter of the draws; in float32 the mask carries the scale. What it saves
    (benchmarks/loop_speed.py): docs/benchmarks/training.md, "The CPU training step".
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if p == 1.0:
        return x * 0.0
    n = x.numel()
    draws = torch.empty((n + 3) // 4, dtype=torch.int64, device=x.device).random_(
        generator=generator
    )
    # random_ fills int64 with 63 uniform bits; each 16-bit lane masked to its low 15 is uniform
    # on [0, 2^15) whatever the byte order (the top lane's 16th bit is the always-zero one).
    bits = draws.view(torch.int16)[:n].view(x.shape)
    bits &= (1 << KEEP_BITS) - 1
    keep = bits >= round(p * (1 << KEEP_BITS))  # (x.shape) bool: P(keep) = 1 - p
    if x.dtype not in (torch.float32, torch.float64):  # 1 / (1 - p) rounded to bf16 would bias it
        return (x * keep).mul_(1.0 / (1.0 - p))
    # The mask in x's dtype with the scale in it: one product forward and one backward (x times a
    # boolean mask converts the mask to x's dtype, then scales: three passes, and two backward).
    scale = torch.full((), 1.0 / (1.0 - p), dtype=x.dtype, device=x.device)
    return x * torch.where(keep, scale, torch.zeros((), dtype=x.dtype, device=x.device))


def activate(x: torch.Tensor, kind: str) -> torch.Tensor:
    """The pointwise activations: relu (the paper), gelu, gelu_tanh (GPT-2's approximation),
    silu."""
    match kind:
        case "relu":
            return F.relu(x)
        case "gelu":
            return F.gelu(x)
        case "gelu_tanh":
            return F.gelu(x, approximate="tanh")
        case "silu":
            return F.silu(x)
        case _:
            raise ValueError(f"unknown activation {kind!r}: use relu, gelu, gelu_tanh or silu")


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * g (Zhang & Sennrich 2019), computed in float32."""

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


def make_norm(kind: str, d_model: int, eps: float, bias: bool = True) -> nn.Module:
    match kind:
        case "layernorm":
            return nn.LayerNorm(d_model, eps=eps, bias=bias)
        case "rmsnorm":
            return RMSNorm(d_model, eps=eps)
        case _:
            raise ValueError(f"unknown norm {kind!r}: use 'layernorm' or 'rmsnorm'")


def residual(x: torch.Tensor, norm: nn.Module, dropout: nn.Module, pre_norm: bool, sublayer):
    """One sub-layer connection. Post-norm (§5.4): LayerNorm(x + Dropout(Sublayer(x)));
    pre-norm: x + Dropout(Sublayer(LayerNorm(x))). sublayer returns (output, extra)."""
    if pre_norm:
        out, extra = sublayer(norm(x))
        return x + dropped(dropout, out), extra
    out, extra = sublayer(x)
    return norm(x + dropped(dropout, out)), extra


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward network, each wrapped in a residual connection
    (§3.1)."""

    def __init__(
        self,
        self_attn: MultiHeadAttention,
        feed_forward: FeedForward,
        norm1: nn.Module,
        norm2: nn.Module,
        dropout: float,
        pre_norm: bool,
    ):
        super().__init__()
        self.self_attn = self_attn
        self.feed_forward = feed_forward
        self.norm1 = norm1
        self.norm2 = norm2
        self.dropout = nn.Dropout(dropout)
        self.pre_norm = pre_norm

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        positions: torch.Tensor | None = None,
        need_weights: bool = False,
        bias: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x (B, S, C), mask (B, 1, S, S) or broadcastable, bias (B or 1, H, S, S) -> (B, S, C),
        weights (B, H, S, S) or None."""
        x, weights = residual(
            x,
            self.norm1,
            self.dropout,
            self.pre_norm,
            lambda h: self.self_attn(
                h, mask=mask, positions=positions, need_weights=need_weights, bias=bias
            ),
        )
        x, _ = residual(
            x, self.norm2, self.dropout, self.pre_norm, lambda h: (self.feed_forward(h), None)
        )
        return x, weights


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder output (absent in decoder-only
    models), then the feed-forward network; each in a residual connection (§3.1)."""

    def __init__(
        self,
        self_attn: MultiHeadAttention,
        cross_attn: MultiHeadAttention | None,
        feed_forward: FeedForward,
        norm1: nn.Module,
        norm2: nn.Module | None,
        norm3: nn.Module,
        dropout: float,
        pre_norm: bool,
    ):
        super().__init__()
        self.self_attn = self_attn
        self.cross_attn = cross_attn
        self.feed_forward = feed_forward
        self.norm1 = norm1
        self.norm2 = norm2
        self.norm3 = norm3
        self.dropout = nn.Dropout(dropout)
        self.pre_norm = pre_norm

    def _self(
        self,
        h,
        mask,
        is_causal,
        positions,
        cache: LayerCache | None,
        need_weights,
        tree: int = 1,
        bias=None,
    ):
        q = None  # queries already projected (fused q/k/v: one product), else attend projects them
        if self.self_attn.qkv_proj is not None:
            q, k, v = self.self_attn.project_qkv(h, positions)
        else:
            k, v = self.self_attn.project_kv(h, positions)  # (B, K, T, D)
        if tree > 1:
            # A prefix-tree cache (cache.py): each of the G beams of a sentence adds one cell, and
            # the G queries attend together over the sentence's cells; the mask picks each path.
            b, _, c = h.shape  # one new token per beam
            n, heads = b // tree, k.shape[1]
            if q is not None:  # (B, H, 1, D) -> (N, H, G, D), as attend would project h below
                q = q.reshape(n, tree, q.shape[1], q.shape[3]).transpose(1, 2)
            k, v = cache.append(
                k.reshape(n, tree, heads, k.shape[3]).transpose(1, 2),
                v.reshape(n, tree, heads, v.shape[3]).transpose(1, 2),
            )  # (N, K, S_cells, D)
            out, weights = self.self_attn.attend(
                h.reshape(n, tree, c),
                k,
                v,
                mask,
                positions=positions.reshape(n, tree),
                need_weights=need_weights,
                bias=bias,
                q=q,
            )
            return out.reshape(b, 1, c), weights
        if cache is not None:
            k, v = cache.append(k, v)  # (B, K, S_past + T, D), written in place
        return self.self_attn.attend(h, k, v, mask, is_causal, positions, need_weights, bias, q)

    def _cross(
        self, h, memory, memory_mask, cache: LayerCache | None, need_weights, group: int = 1
    ):
        if cache is not None and cache.cross_kv is not None:
            k, v = cache.cross_kv  # computed once per source
        else:
            if memory is None:
                raise ValueError(
                    "cross-attention needs the encoder output (memory) on the first decoding step"
                )
            k, v = self.cross_attn.project_kv(memory)
            if cache is not None:
                cache.cross_kv = (k, v)
        if group == 1:
            return self.cross_attn.attend(h, k, v, memory_mask, need_weights=need_weights)
        # Rows come in groups of `group` (beams of one sentence) over one source's keys/values:
        # the group's queries attend together, one (B_src, group * T) query block per source.
        b, t, c = h.shape
        out, weights = self.cross_attn.attend(
            h.reshape(b // group, group * t, c), k, v, memory_mask, need_weights=need_weights
        )
        if weights is not None:  # (B_src, H, group * T, S) -> (B, H, T, S)
            n, heads, _, s = weights.shape
            weights = weights.view(n, heads, group, t, s).transpose(1, 2).reshape(b, heads, t, s)
        return out.reshape(b, t, c), weights

    def forward(
        self,
        x: torch.Tensor,
        self_mask: torch.Tensor | None,
        is_causal: bool,
        positions: torch.Tensor | None,
        memory: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        cache: LayerCache | None = None,
        need_weights: bool = False,
        memory_group: int = 1,
        tree: int = 1,
        self_bias: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor | None, torch.Tensor | None]]:
        """x (B, T, C), memory (B, S, C) -> (B, T, C) and (self weights (B, H, T, T'), cross weights
        (B, H, T, S)).

        memory_group > 1: the cached cross-attention keys/values are per source, and rows come in
        consecutive groups of memory_group rows per source (KVCache.group_size). tree > 1: the
        self-attention cache is a prefix tree of `tree` beams per sentence and self_mask its
        (N, 1, G, S_cells) mask (KVCache.grow_tree). self_bias: T5's relative position bias on the
        self-attention scores, (B or 1, H, T, T') ((N, H, G, S_cells) with a tree).
        """
        x, self_w = residual(
            x,
            self.norm1,
            self.dropout,
            self.pre_norm,
            lambda h: self._self(
                h, self_mask, is_causal, positions, cache, need_weights, tree, self_bias
            ),
        )
        cross_w = None
        if self.cross_attn is not None:
            x, cross_w = residual(
                x,
                self.norm2,
                self.dropout,
                self.pre_norm,
                lambda h: self._cross(h, memory, memory_mask, cache, need_weights, memory_group),
            )
        x, _ = residual(
            x, self.norm3, self.dropout, self.pre_norm, lambda h: (self.feed_forward(h), None)
        )
        return x, (self_w, cross_w)
