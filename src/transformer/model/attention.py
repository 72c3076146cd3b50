"""Scaled dot-product attention (§3.2.1) and multi-head attention (§3.2.2); the KV cache is in
cache.py.

Legend (model/__init__.py): B batch, T query length, S key length, L either, C d_model, H query
heads, K key/value heads (K = H for plain multi-head, K < H for grouped-query), D head dim (d_k),
Dv the values' head dim (d_v).
Masks are booleans, True = may attend, broadcastable to (B, H, T, S). A bias (T5's relative
position bias) is a float tensor broadcastable to (B, H, T, S), added to the scores.
A query row with nothing to attend to gives a zero vector, never NaN, in both paths.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import nn

from .linear import linear
from .masks import causal_mask
from .positional import RotaryEmbedding


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
    generator: torch.Generator | None = None,
    bias: torch.Tensor | None = None,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The textbook softmax(Q K^T / sqrt(D) + bias) V of §3.2.1, returning (output, weights).

    q (B, H, T, D); k (B, K, S, D), v (B, K, S, Dv) with K dividing H (grouped-query: head h reads
    key/value head h // (H / K)). scale replaces 1 / sqrt(D) (T5: 1). Returns (B, H, T, Dv) and
    the weights (B, H, T, S).
    """
    n_rep = q.shape[1] // k.shape[1]
    if n_rep > 1:
        k = k.repeat_interleave(n_rep, dim=1)  # (B, H, S, D)
        v = v.repeat_interleave(n_rep, dim=1)
    scores = q @ k.transpose(-2, -1)  # (B, H, T, S)
    scores = scores / math.sqrt(q.shape[-1]) if scale is None else scores * scale
    if bias is not None:
        scores = scores + bias.to(scores.dtype)
    if is_causal:
        causal = causal_mask(
            q.shape[2], k.shape[2], offset=k.shape[2] - q.shape[2], device=q.device
        )
        mask = causal if mask is None else mask & causal
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    if mask is not None:
        # A fully masked row would otherwise be uniform over the hidden keys.
        weights = weights.masked_fill(~mask, 0.0)
    if dropout_p > 0.0:
        keep = torch.rand(weights.shape, generator=generator, device=weights.device) >= dropout_p
        weights = weights * keep / (1.0 - dropout_p)
    return weights @ v, weights


def fused_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
    bias: torch.Tensor | None = None,
    scale: float | None = None,
) -> torch.Tensor:
    """The same computation through torch's fused kernel (flash / memory-efficient / math).

    A bias goes in as the kernel's additive float mask, with the boolean mask (and causal
    masking) folded into it as the dtype's lowest value."""
    t, s = q.shape[2], k.shape[2]
    if is_causal and (mask is not None or t != s or bias is not None):
        # torch's is_causal aligns the corner top-left; with cached keys it must be bottom-right.
        causal = causal_mask(t, s, offset=s - t, device=q.device)
        mask = causal if mask is None else mask & causal
        is_causal = False
    attn_mask = mask
    if bias is not None:
        attn_mask = bias.to(q.dtype)
        if mask is not None:
            attn_mask = attn_mask.masked_fill(~mask, torch.finfo(q.dtype).min)
    out = F.scaled_dot_product_attention(
        q,
        k,
        v,
        attn_mask=attn_mask,
        dropout_p=dropout_p,
        # plain bools: under torch.compile's dynamic shapes these are symbolic, and the `if`
        # makes torch specialise on them
        is_causal=True if is_causal else False,  # noqa: SIM210
        scale=scale,
        enable_gqa=True if q.shape[1] != k.shape[1] else False,  # noqa: SIM210
    )
    if mask is not None and not (
        bias is None
        and dropout_p == 0.0
        and not torch.is_grad_enabled()
        and q.device.type == "cpu"
        and not torch.compiler.is_compiling()  # a compiled graph fuses the fix for free
        and _cpu_kernel_zeroes_empty_rows(q.dtype)
    ):
        # Kernels differ on rows with no key at all (NaN in older torch); make them zeros.
        out = out.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return out


@functools.cache
def _cpu_kernel_zeroes_empty_rows(dtype: torch.dtype) -> bool:
    """Whether this torch's CPU kernel, at inference, already gives zeros for a query with no key.

    torch 2.13 does; then incremental decoding skips the three extra operations of the fix
    above on every layer and step. Checked once per dtype on a small case, with one and
    several queries.
    """
    with torch.inference_mode():
        q, k, v = (torch.ones(2, 2, n, 8, dtype=dtype) for n in (3, 4, 4))
        mask = torch.ones(2, 1, 3, 4, dtype=torch.bool)
        mask[1] = False
        out = [
            F.scaled_dot_product_attention(q[:, :, :t], k, v, attn_mask=mask[:, :, :t])
            for t in (1, 3)
        ]
    return all(bool((o[1] == 0).all()) and bool((o[0] == 1).all()) for o in out)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O,
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V) (§3.2.2).

    Self-attention when `source` is None, cross-attention otherwise. With n_kv_heads < n_heads
    it is grouped-query attention (Ainslie et al. 2023). `rotary` rotates queries and keys.
    Each head has d_k query/key and d_v value dimensions (both d_model / n_heads by default);
    `scale` multiplies the scores (None = 1 / sqrt(d_k); T5: 1).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_kv_heads: int | None = None,
        bias: bool = True,
        dropout: float = 0.0,
        impl: str = "fused",
        rotary: RotaryEmbedding | None = None,
        d_k: int | None = None,
        d_v: int | None = None,
        scale: float | None = None,
    ):
        super().__init__()
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads or n_heads
        self.head_dim = d_v or d_model // n_heads  # d_v: each head's share of the output
        self.qk_dim = d_k or self.head_dim  # d_k
        self.scale = scale
        self.dropout = dropout
        self.impl = impl
        self.rotary = rotary
        self.q_proj = nn.Linear(d_model, n_heads * self.qk_dim, bias=bias)
        self.k_proj = nn.Linear(d_model, self.n_kv_heads * self.qk_dim, bias=bias)
        self.v_proj = nn.Linear(d_model, self.n_kv_heads * self.head_dim, bias=bias)
        self.out_proj = nn.Linear(n_heads * self.head_dim, d_model, bias=bias)
        self.qkv_proj: nn.Module | None = None
        """Inference only (model.quantize.fuse_projections): q, k and v in one product."""

    @staticmethod
    def _split(x: torch.Tensor, n: int) -> torch.Tensor:
        b, length, width = x.shape
        return x.view(b, length, n, width // n).transpose(1, 2)  # (B, H or K, L, D)

    def project_kv(
        self,
        source: torch.Tensor,
        positions: torch.Tensor | None = None,
        values: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, S, C) -> keys (B, K, S, D), values (B, K, S, Dv); keys rotated when rotary is set.
        values (B, S, C): project the values from this instead of source (DETR's keys carry the
        positions, its values do not)."""
        k = self._split(linear(self.k_proj, source), self.n_kv_heads)
        v = self._split(linear(self.v_proj, source if values is None else values), self.n_kv_heads)
        if self.rotary is not None:
            k = self.rotary(k, positions)
        return k, v

    def project_qkv(
        self, x: torch.Tensor, positions: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Self-attention's (B, T, C) -> queries (B, H, T, D), keys and values (B, K, T, D) from
        one product (qkv_proj, made by fuse_projections), rotated as attend and project_kv rotate
        them."""
        widths = (self.n_heads * self.qk_dim, self.n_kv_heads * self.qk_dim)
        q, k, v = linear(self.qkv_proj, x).split([*widths, self.n_kv_heads * self.head_dim], -1)
        q = self._split(q, self.n_heads)
        k, v = self._split(k, self.n_kv_heads), self._split(v, self.n_kv_heads)
        if self.rotary is not None:
            q, k = self.rotary(q, positions), self.rotary(k, positions)
        return q, k, v

    def attend(
        self,
        x: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor | None = None,
        is_causal: bool = False,
        positions: torch.Tensor | None = None,
        need_weights: bool = False,
        bias: torch.Tensor | None = None,
        q: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Queries from x (B, T, C) attend over k, v (B, K, S, D) -> (B, T, C) and weights
        (B, H, T, S) or None.

        bias (broadcastable to (B, H, T, S)) is added to the scores (T5's relative position
        bias). q: the queries already projected and rotated (project_qkv), instead of x's."""
        b, t, _ = x.shape
        if q is None:
            q = self._split(linear(self.q_proj, x), self.n_heads)  # (B, H, T, D)
            if self.rotary is not None:
                q = self.rotary(q, positions)
        dropout_p = self.dropout if self.training else 0.0
        weights = None
        if self.impl == "textbook" or need_weights:
            out, weights = scaled_dot_product_attention(
                q, k, v, mask, is_causal, dropout_p, bias=bias, scale=self.scale
            )
        else:
            out = fused_attention(q, k, v, mask, is_causal, dropout_p, bias=bias, scale=self.scale)
        out = out.transpose(1, 2).reshape(b, t, self.n_heads * self.head_dim)  # (B, T, H*D)
        return linear(self.out_proj, out), weights

    def forward(
        self,
        x: torch.Tensor,
        source: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        is_causal: bool = False,
        positions: torch.Tensor | None = None,
        need_weights: bool = False,
        bias: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attention without a cache: x (B, T, C) over source (B, S, C) or over itself."""
        k, v = self.project_kv(x if source is None else source, positions)
        return self.attend(x, k, v, mask, is_causal, positions, need_weights, bias)
