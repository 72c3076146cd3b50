"""Attention: the textbook path against explicit loops, the fused path against the textbook one."""

import math

import pytest
import torch

from transformer.model.attention import (
    MultiHeadAttention,
    fused_attention,
    scaled_dot_product_attention,
)
from transformer.model.masks import attention_mask, causal_mask


def loop_attention(q, k, v, mask, bias=None, scale=None):
    """softmax(q k^T / sqrt(d) + bias) v one query at a time, hidden keys skipped; empty rows are zeros."""
    b, h, t, d = q.shape
    rep = h // k.shape[1]
    out = q.new_zeros(b, h, t, v.shape[-1])
    mask = torch.ones(b, h, t, k.shape[2], dtype=torch.bool) if mask is None else mask.expand(b, h, t, k.shape[2])
    for bi in range(b):
        for hi in range(h):
            for ti in range(t):
                allowed = mask[bi, hi, ti]
                if not allowed.any():
                    continue
                keys, values = k[bi, hi // rep][allowed], v[bi, hi // rep][allowed]
                scores = keys @ q[bi, hi, ti] * (1 / math.sqrt(d) if scale is None else scale)
                if bias is not None:
                    scores = scores + bias.expand(b, h, t, k.shape[2])[bi, hi, ti][allowed]
                w = torch.softmax(scores, dim=0)
                out[bi, hi, ti] = w @ values
    return out


def random_case(b, h, kv, t, s, d, causal, pad, gen):
    q = torch.randn(b, h, t, d, generator=gen)
    k = torch.randn(b, kv, s, d, generator=gen)
    v = torch.randn(b, kv, s, d, generator=gen)
    key_mask = torch.ones(b, s, dtype=torch.bool)
    if pad:
        lengths = torch.randint(0, s + 1, (b,), generator=gen)
        lengths[0] = 0  # one row with no real key at all: every query of it is fully masked
        key_mask = torch.arange(s)[None] < lengths[:, None]
    mask = attention_mask(key_mask if pad else None, t, causal=causal)
    if causal and mask is None:
        mask = causal_mask(t, s, offset=s - t)[None, None]
    return q, k, v, mask


CASES = [  # (B, H, K, T, S, D, causal, padding)
    (2, 4, 4, 5, 5, 8, False, False),  # self-attention
    (3, 4, 4, 6, 6, 8, True, False),  # masked self-attention
    (3, 4, 4, 6, 6, 16, True, True),  # masked self-attention with padded keys
    (3, 2, 2, 4, 9, 8, False, True),  # cross-attention, padded source
    (2, 8, 2, 5, 5, 4, True, True),  # grouped-query, 4 query heads per key/value head
    (2, 6, 3, 3, 7, 8, True, True),  # cached decoding: 3 new queries over 7 keys
    (2, 4, 1, 1, 6, 8, False, True),  # multi-query, one decoding step
]


@pytest.mark.parametrize("case", CASES)
def test_textbook_matches_explicit_loop(case):
    gen = torch.Generator().manual_seed(1)
    q, k, v, mask = random_case(*case, gen)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, loop_attention(q, k, v, mask), atol=1e-5, rtol=1e-5)
    rows = weights.sum(-1)
    empty = ~mask.any(-1).expand_as(rows) if mask is not None else torch.zeros_like(rows, dtype=torch.bool)
    torch.testing.assert_close(rows[~empty], torch.ones_like(rows[~empty]))
    assert (rows[empty] == 0).all()


@pytest.mark.parametrize("case", CASES)
def test_fused_matches_textbook(case):
    gen = torch.Generator().manual_seed(2)
    q, k, v, mask = random_case(*case, gen)
    expected, _ = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(fused_attention(q, k, v, mask), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("t, s", [(5, 5), (3, 8)])
def test_is_causal_flag_matches_explicit_causal_mask(t, s):
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 4, n, 8, generator=gen) for n in (t, s, s))
    explicit = causal_mask(t, s, offset=s - t)[None, None]
    expected, _ = scaled_dot_product_attention(q, k, v, explicit)
    got_textbook, _ = scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(got_textbook, expected)
    torch.testing.assert_close(fused_attention(q, k, v, is_causal=True), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("path", ["textbook", "fused"])
@pytest.mark.parametrize("mode", ["autograd", "inference"])  # at inference the fused path may rely on the kernel
@pytest.mark.parametrize("t", [4, 1])
def test_fully_masked_rows_give_zeros_not_nan(dtype, path, mode, t):
    q, k, v = (torch.randn(2, 2, n, 8, dtype=dtype) for n in (t, 4, 4))
    mask = torch.ones(2, 1, t, 4, dtype=torch.bool)
    if t > 1:
        mask[0, 0, 1] = False  # one query row sees nothing
    mask[1] = False  # a whole sequence sees nothing
    with torch.inference_mode(mode == "inference"):
        out = scaled_dot_product_attention(q, k, v, mask)[0] if path == "textbook" else fused_attention(q, k, v, mask)
    assert not out.isnan().any()
    assert (out[1] == 0).all()
    if t > 1:
        assert (out[0, :, 1] == 0).all()
    assert (out[0, :, 0] != 0).any()  # a row with keys is untouched


def test_grouped_query_equals_multi_head_with_repeated_kv_heads():
    gen = torch.Generator().manual_seed(4)
    q = torch.randn(2, 6, 5, 8, generator=gen)
    k, v = torch.randn(2, 2, 5, 8, generator=gen), torch.randn(2, 2, 5, 8, generator=gen)
    grouped, _ = scaled_dot_product_attention(q, k, v)
    full, _ = scaled_dot_product_attention(q, k.repeat_interleave(3, 1), v.repeat_interleave(3, 1))
    torch.testing.assert_close(grouped, full)


@pytest.mark.parametrize("n_kv_heads", [None, 2])
def test_multi_head_module_paths_agree_and_weights_have_heads(n_kv_heads):
    torch.manual_seed(5)
    mha = MultiHeadAttention(32, 4, n_kv_heads, impl="fused").eval()
    x, memory = torch.randn(2, 5, 32), torch.randn(2, 7, 32)
    key_mask = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    mask = attention_mask(key_mask, 5)
    fused, none = mha(x, memory, mask)
    assert none is None
    mha.impl = "textbook"
    textbook, weights = mha(x, memory, mask)
    torch.testing.assert_close(fused, textbook, atol=1e-5, rtol=1e-5)
    assert weights.shape == (2, 4, 5, 7)
    assert (weights[1, :, :, 4:] == 0).all()
    mha.impl = "fused"
    _, weights_on_request = mha(x, memory, mask, need_weights=True)
    torch.testing.assert_close(weights_on_request, weights)


@pytest.mark.parametrize("n_kv_heads", [None, 2])
def test_a_smaller_d_k_keeps_the_value_width_and_both_paths_agree(n_kv_heads):
    """d_k (Table 3 (B)): queries and keys of 3 dimensions per head, values of d_model / n_heads = 8;
    the fused kernel, the textbook path and an explicit loop agree, with padding."""
    torch.manual_seed(6)
    mha = MultiHeadAttention(32, 4, n_kv_heads, impl="fused", d_k=3).eval()
    kv = n_kv_heads or 4
    assert mha.q_proj.weight.shape == (12, 32) and mha.k_proj.weight.shape == (kv * 3, 32)
    assert mha.v_proj.weight.shape == (kv * 8, 32) and mha.out_proj.weight.shape == (32, 32)
    x, memory = torch.randn(2, 5, 32), torch.randn(2, 7, 32)
    mask = attention_mask(torch.tensor([[True] * 7, [True] * 4 + [False] * 3]), 5)
    fused, _ = mha(x, memory, mask)
    mha.impl = "textbook"
    textbook, _ = mha(x, memory, mask)
    torch.testing.assert_close(fused, textbook, atol=1e-5, rtol=1e-5)
    k, v = mha.project_kv(memory)
    q = mha._split(mha.q_proj(x), 4)
    assert q.shape[-1] == k.shape[-1] == 3 and v.shape[-1] == 8
    expected = loop_attention(q, k, v, mask).transpose(1, 2).reshape(2, 5, 32)
    torch.testing.assert_close(textbook, mha.out_proj(expected), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("per_row", [False, True])
def test_an_additive_bias_and_another_scale_match_the_loop_in_both_paths(case, per_row):
    # T5: unscaled scores plus a relative position bias, with padding and causal masks; the fused
    # path folds the masks into its float mask, and rows with no key still give zeros.
    gen = torch.Generator().manual_seed(sum(case) + per_row)
    q, k, v, mask = random_case(*case, gen)
    b, h, t, s = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    bias = 2 * torch.randn(b if per_row else 1, h, t, s, generator=gen)
    want = loop_attention(q, k, v, mask, bias, scale=1.0)
    textbook, _ = scaled_dot_product_attention(q, k, v, mask, bias=bias, scale=1.0)
    torch.testing.assert_close(textbook, want, atol=1e-5, rtol=1e-5)
    for grad in (True, False):  # the fused path's inference-only shortcut must not apply with a bias
        with torch.set_grad_enabled(grad):
            torch.testing.assert_close(fused_attention(q, k, v, mask, bias=bias, scale=1.0), want, atol=1e-5, rtol=1e-5)
    if case[6] and not case[7]:  # causal without padding: the is_causal flag with a bias
        flagged = fused_attention(q, k, v, None, is_causal=True, bias=bias, scale=1.0)
        torch.testing.assert_close(flagged, want, atol=1e-5, rtol=1e-5)
