"""Fused attention on the device (model/attention.py: torch's kernels) against the textbook
softmax(Q K^T / sqrt(D) + bias) V of §3.2.1 computed in float64 on the same (upcast) inputs:
forward and the gradients of q, k, v (and of a T5 bias), for every mask the model passes.

Legend (model/__init__.py): B batch, H query heads, K key/value heads, T query length, S key
length, D head dim.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from tests.cuda.common import TOLERANCE, assert_rel_close
from transformer.model.attention import fused_attention, scaled_dot_product_attention

pytestmark = pytest.mark.cuda

B, H, D = 3, 4, 64
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


@dataclass(frozen=True)
class Case:
    """One call of fused_attention as the model makes it."""

    t: int
    s: int
    lengths: tuple[int, ...] | None = None
    """Real keys per row (None = no padding mask); the mask is (B, 1, 1, S)."""
    left: bool = False
    """Padding on the left (a decoder-only model's prompts), else on the right."""
    is_causal: bool = False
    kv_heads: int = H
    bias: bool = False
    """A float T5 bias (1, H, T, S) that learns (its gradient is compared too); scale 1 as T5's."""
    train: bool = True
    """Compare the backward pass too (the shapes of training)."""


CASES = {
    "no-mask": Case(29, 29),
    "padding": Case(29, 29, lengths=(29, 17, 4)),  # the encoder's self-attention
    "cross-padding": Case(11, 29, lengths=(29, 17, 4)),  # cross-attention: T != S
    "causal": Case(29, 29, is_causal=True),  # the decoder's self-attention in training
    "causal-cached": Case(5, 29, is_causal=True, train=False),  # T < S: bottom-right corner
    # Left-padded prompts under a causal mask: a padding query sees only padding keys, so those
    # rows are fully masked (zeros, and no NaN in any gradient).
    "padding-causal-left": Case(29, 29, lengths=(29, 17, 4), left=True, is_causal=True),
    "padding-causal-cached": Case(
        5, 29, lengths=(29, 17, 6), left=True, is_causal=True, train=False
    ),
    "gqa-causal": Case(29, 29, is_causal=True, kv_heads=2),
    "gqa-padding": Case(29, 29, lengths=(29, 17, 4), kv_heads=1),
    "t5-bias-padding": Case(29, 29, lengths=(29, 17, 4), bias=True),
    "t5-bias-causal": Case(29, 29, is_causal=True, bias=True),
    "fully-masked-row": Case(11, 29, lengths=(29, 9, 0)),  # cross-attention over an empty source
}


def key_mask(case: Case, device) -> torch.Tensor | None:
    """The (B, 1, 1, S) padding mask of case.lengths, True = real key."""
    if case.lengths is None:
        return None
    lengths = torch.tensor(case.lengths)[:, None]
    slots = torch.arange(case.s)[None]  # (1, S)
    real = slots >= case.s - lengths if case.left else slots < lengths  # (B, S)
    return real[:, None, None, :].to(device)


def inputs(case: Case, dtype: torch.dtype, device, seed: int):
    """Unit normal q (B, H, T, D) and k, v (B, K, S, D), laid out as the model's are (a
    (B, L, heads, D) projection, transposed), the upstream gradient (B, H, T, D) and the bias
    (1, H, T, S) or None: drawn on the CPU with a fixed seed, then moved to the device."""
    g = torch.Generator().manual_seed(seed)

    def draw(length, heads, std=1.0):
        x = torch.randn(B, length, heads, D, generator=g).transpose(1, 2) * std
        return x.to(device=device, dtype=dtype).requires_grad_()

    # T5 scores are unscaled (scale 1): its query projection is initialised D^-1/2 smaller instead.
    q = draw(case.t, H, D**-0.5 if case.bias else 1.0)
    k, v = draw(case.s, case.kv_heads), draw(case.s, case.kv_heads)
    grad_out = torch.randn(B, H, case.t, D, generator=g).to(device=device, dtype=dtype)
    bias = None
    if case.bias:  # the relative position table's output: fp32 whatever the inputs' dtype
        bias = torch.randn(1, H, case.t, case.s, generator=g).to(device).requires_grad_()
    return q, k, v, grad_out, bias


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("name", list(CASES))
def test_fused_attention_matches_the_textbook_in_float64(name, dtype, device):
    """Output and gradients within TOLERANCE[dtype]; rows with no visible key are zeros."""
    case = CASES[name]
    tol = TOLERANCE[dtype]
    q, k, v, grad_out, bias = inputs(case, dtype, device, seed=list(CASES).index(name))
    mask = key_mask(case, device)
    scale = 1.0 if case.bias else None
    out = fused_attention(q, k, v, mask, case.is_causal, bias=bias, scale=scale)
    leaves = [x for x in (q, k, v, bias) if x is not None]
    ref_leaves = [x.detach().double().requires_grad_() for x in leaves]
    q64, k64, v64 = ref_leaves[:3]
    bias64 = ref_leaves[3] if bias is not None else None
    ref, _ = scaled_dot_product_attention(
        q64, k64, v64, mask, case.is_causal, bias=bias64, scale=scale
    )
    assert out.dtype == dtype and out.device.type == device.type
    assert_rel_close(out, ref, tol, f"{name} {dtype} output")

    # Rows with no key to attend to are exactly zero in both (never NaN).
    visible = torch.ones(B, 1, case.t, case.s, dtype=torch.bool, device=device)
    if mask is not None:
        visible = visible & mask
    if case.is_causal:
        visible = visible & torch.ones(case.t, case.s, dtype=torch.bool, device=device).tril(
            case.s - case.t
        )
    empty = ~visible.any(dim=-1).expand(B, H, case.t)  # (B, H, T)
    if name in ("padding-causal-left", "fully-masked-row"):
        assert empty.any()  # the case does hold such rows
    assert (out[empty] == 0).all() and (ref[empty] == 0).all()

    if not case.train:
        return
    grads = torch.autograd.grad(out, leaves, grad_out)
    ref_grads = torch.autograd.grad(ref, ref_leaves, grad_out.double())
    for label, leaf, ours, theirs in zip(
        "qkvb"[: len(leaves)], leaves, grads, ref_grads, strict=True
    ):
        assert ours.dtype == leaf.dtype
        assert_rel_close(ours, theirs, tol, f"{name} {dtype} gradient of {label}")
