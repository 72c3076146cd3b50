"""Scaled dot-product attention (§3.2.1), multi-head attention (§3.2.2) and the KV cache.

Legend: B batch, T query length, S key length, C d_model, H query heads,
K key/value heads (K = H for plain multi-head, K < H for grouped-query), D head dim.
Masks are booleans, True = may attend, broadcastable to (B, H, T, S).
A query row with nothing to attend to gives a zero vector, never NaN, in both paths.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

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
) -> tuple[torch.Tensor, torch.Tensor]:
    """The textbook softmax(Q K^T / sqrt(D)) V of §3.2.1, returning (output, weights).

    q (B, H, T, D); k, v (B, K, S, D) with K dividing H (grouped-query: head h reads
    key/value head h // (H / K)). Returns (B, H, T, D) and the weights (B, H, T, S).
    """
    n_rep = q.shape[1] // k.shape[1]
    if n_rep > 1:
        k = k.repeat_interleave(n_rep, dim=1)  # (B, H, S, D)
        v = v.repeat_interleave(n_rep, dim=1)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # (B, H, T, S)
    if is_causal:
        causal = causal_mask(q.shape[2], k.shape[2], offset=k.shape[2] - q.shape[2], device=q.device)
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
) -> torch.Tensor:
    """The same computation through torch's fused kernel (flash / memory-efficient / math)."""
    t, s = q.shape[2], k.shape[2]
    if is_causal and (mask is not None or t != s):
        # torch's is_causal aligns the corner top-left; with cached keys it must be bottom-right.
        causal = causal_mask(t, s, offset=s - t, device=q.device)
        mask = causal if mask is None else mask & causal
        is_causal = False
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal, enable_gqa=q.shape[1] != k.shape[1]
    )
    if mask is not None and not (dropout_p == 0.0 and not torch.is_grad_enabled() and q.device.type == "cpu"
                                 and _cpu_kernel_zeroes_empty_rows(q.dtype)):
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
        out = [F.scaled_dot_product_attention(q[:, :, :t], k, v, attn_mask=mask[:, :, :t]) for t in (1, 3)]
    return all(bool((o[1] == 0).all()) and bool((o[0] == 1).all()) for o in out)


@dataclass
class LayerCache:
    """Cached keys/values of one decoder layer: self-attention grows, cross-attention is fixed.

    Self-attention keys/values live in preallocated storage (B, K, capacity, D) that grows by
    doubling: a step writes its new position in place instead of concatenating the whole cache
    again, and `self_kv` holds views of the filled part. A reorder (beam search, dropped rows)
    copies the kept rows into a second set of buffers and keeps the first as the spare for the
    next one, so steady-state decoding allocates nothing (fresh multi-megabyte buffers cost page
    faults on every step; docs/benchmarks.md). Cross-attention keys/values are kept once per
    source (see KVCache.group_size).
    """

    self_kv: tuple[torch.Tensor, torch.Tensor] | None = None  # (B, K, S, D) each
    cross_kv: tuple[torch.Tensor, torch.Tensor] | None = None  # (B_src, K, S_src, D) each
    buffers: tuple[torch.Tensor, torch.Tensor] | None = None  # (B_max, K, capacity, D) each; self_kv = buffers[:B, :, :S]
    spare: tuple[torch.Tensor, torch.Tensor] | None = None  # (B_max, K, capacity, D) each: free for the next reorder

    def _buffers_hold_self_kv(self) -> bool:
        return (self.buffers is not None and self.self_kv is not None
                and self.self_kv[0].data_ptr() == self.buffers[0].data_ptr())

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add new self-attention keys/values (B, K, T, D); return all of them (B, K, S_past + T, D)."""
        if k.requires_grad or v.requires_grad:  # autograd: no in-place writes into tensors it saved
            if self.self_kv is not None:
                k = torch.cat([self.self_kv[0], k], dim=2)
                v = torch.cat([self.self_kv[1], v], dim=2)
            self.self_kv, self.buffers, self.spare = (k, v), None, None
            return self.self_kv
        rows, past = k.shape[0], 0 if self.self_kv is None else self.self_kv[0].shape[2]
        total = past + k.shape[2]
        usable = (past > 0 and self._buffers_hold_self_kv() and self.buffers[0].shape[2] >= total
                  and self.buffers[0].dtype == k.dtype)
        if not usable:
            capacity = max(16, 2 * total)
            ks = k.new_empty(rows, k.shape[1], capacity, k.shape[3])
            vs = v.new_empty(rows, v.shape[1], capacity, v.shape[3])
            if past:
                ks[:, :, :past] = self.self_kv[0]
                vs[:, :, :past] = self.self_kv[1]
            self.buffers, self.spare = (ks, vs), None
        ks, vs = self.buffers[0][:rows], self.buffers[1][:rows]  # leading rows of contiguous buffers
        ks[:, :, past:total] = k
        vs[:, :, past:total] = v
        self.self_kv = (ks[:, :, :total], vs[:, :, :total])
        return self.self_kv

    def reorder_self(self, index: torch.Tensor) -> None:
        """Keep/reorder/repeat the self-attention rows: index (B',) of current rows."""
        if self.self_kv is None:
            return
        if not self._buffers_hold_self_kv() or self.self_kv[0].requires_grad:
            self.self_kv = (self.self_kv[0].index_select(0, index), self.self_kv[1].index_select(0, index))
            self.buffers = self.spare = None
            return
        filled, rows = self.self_kv[0].shape[2], len(index)
        spare = self.spare
        if spare is None or spare[0].shape[0] < rows or spare[0].shape[1:] != self.buffers[0].shape[1:]:
            spare = tuple(buf.new_empty(rows, *buf.shape[1:]) for buf in self.buffers)
        for full, out in zip(self.self_kv, spare, strict=True):
            torch.index_select(full, 0, index, out=out[:rows, :, :filled])  # copies the filled part only
        self.spare, self.buffers = self.buffers, (spare[0], spare[1])
        self.self_kv = (spare[0][:rows, :, :filled], spare[1][:rows, :, :filled])


@dataclass
class KVCache:
    """State for incremental decoding: one new position per step costs one new position of work.

    key_mask marks the real tokens among the cached self-attention keys (None = all real);
    memory_mask is the source mask for cross-attention; positions holds each row's next
    absolute position (rows of a left-padded batch count from their first real token).
    Rows come in consecutive groups of `group_size` rows that read the same source (the beams
    of one sentence): cross-attention keys/values and memory_mask are kept once per group.
    """

    layers: list[LayerCache]
    length: int = 0
    key_mask: torch.Tensor | None = None  # (B, S)
    memory_mask: torch.Tensor | None = None  # (B_src, S_src)
    positions: torch.Tensor | None = None  # (B,)
    group_size: int = 1

    @classmethod
    def empty(cls, n_layers: int) -> KVCache:
        return cls(layers=[LayerCache() for _ in range(n_layers)])

    def reorder(self, index: torch.Tensor, group_size: int | None = None, sources: torch.Tensor | None = None) -> None:
        """Keep/reorder/repeat batch rows: beam search reorders, finished sentences are dropped.

        index (B',) picks the new rows from the current ones. Without group_size every row may
        come from anywhere, and cross-attention state follows its row. With group_size the new
        rows are len(sources) consecutive groups of group_size rows, group j reading current
        source sources[j] (None = every current source, in order): cross-attention state is
        then selected per source, not copied per row. The caller guarantees that every row of
        group j comes from a row that read source sources[j].
        """

        def pick(t, i):
            return None if t is None else t.index_select(0, i)

        n_sources = self._n_sources() if sources is None else len(sources)
        for layer in self.layers:
            layer.reorder_self(index)
        self.key_mask = pick(self.key_mask, index)
        self.positions = pick(self.positions, index)
        if group_size is None:
            if self.group_size > 1:  # back to one source per row: row r reads source r // group_size
                index = torch.div(index, self.group_size, rounding_mode="floor")
            for layer in self.layers:
                if layer.cross_kv is not None:
                    layer.cross_kv = (pick(layer.cross_kv[0], index), pick(layer.cross_kv[1], index))
            self.memory_mask = pick(self.memory_mask, index)
            self.group_size = 1
            return
        if index.numel() != n_sources * group_size:
            raise ValueError(f"{index.numel()} rows cannot form {n_sources} groups of {group_size}")
        if sources is not None:
            for layer in self.layers:
                if layer.cross_kv is not None:
                    layer.cross_kv = (pick(layer.cross_kv[0], sources), pick(layer.cross_kv[1], sources))
            self.memory_mask = pick(self.memory_mask, sources)
        self.group_size = group_size

    def _n_sources(self) -> int:
        for layer in self.layers:
            if layer.cross_kv is not None:
                return layer.cross_kv[0].shape[0]
        if self.memory_mask is not None:
            return self.memory_mask.shape[0]
        rows = next((layer.self_kv[0].shape[0] for layer in self.layers if layer.self_kv is not None), 0)
        return rows // self.group_size


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V) (§3.2.2).

    Self-attention when `source` is None, cross-attention otherwise. With n_kv_heads < n_heads
    it is grouped-query attention (Ainslie et al. 2023). `rotary` rotates queries and keys.
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
    ):
        super().__init__()
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads or n_heads
        self.head_dim = d_model // n_heads
        self.dropout = dropout
        self.impl = impl
        self.rotary = rotary
        self.q_proj = nn.Linear(d_model, n_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(d_model, self.n_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(d_model, self.n_kv_heads * self.head_dim, bias=bias)
        self.out_proj = nn.Linear(n_heads * self.head_dim, d_model, bias=bias)

    def _split(self, x: torch.Tensor, n: int) -> torch.Tensor:
        b, length, _ = x.shape
        return x.view(b, length, n, self.head_dim).transpose(1, 2)  # (B, n, L, D)

    def project_kv(self, source: torch.Tensor, positions: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, S, C) -> keys, values (B, K, S, D); keys rotated when rotary is set."""
        k = self._split(linear(self.k_proj, source), self.n_kv_heads)
        v = self._split(linear(self.v_proj, source), self.n_kv_heads)
        if self.rotary is not None:
            k = self.rotary(k, positions)
        return k, v

    def attend(
        self,
        x: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor | None = None,
        is_causal: bool = False,
        positions: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Queries from x (B, T, C) attend over k, v (B, K, S, D) -> (B, T, C) and weights (B, H, T, S) or None."""
        b, t, _ = x.shape
        q = self._split(linear(self.q_proj, x), self.n_heads)  # (B, H, T, D)
        if self.rotary is not None:
            q = self.rotary(q, positions)
        dropout_p = self.dropout if self.training else 0.0
        weights = None
        if self.impl == "textbook" or need_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask, is_causal, dropout_p)
        else:
            out = fused_attention(q, k, v, mask, is_causal, dropout_p)
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
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attention without a cache: x (B, T, C) over source (B, S, C) or over itself."""
        k, v = self.project_kv(x if source is None else source, positions)
        return self.attend(x, k, v, mask, is_causal, positions, need_weights)
