"""Position encodings: §3.5's formula, the halves layout, RoPE's relative-position property, T5's buckets."""

import math

import numpy as np
import pytest
import torch

from transformer.model.positional import (
    LearnedPositions,
    RelativePositionBias,
    RotaryEmbedding,
    SinusoidalPositions,
    relative_bucket,
    sinusoidal_table,
)


def test_sinusoidal_follows_section_3_5():
    table = sinusoidal_table(50, 16)
    for pos in (0, 1, 7, 49):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_halves_layout_is_the_same_values_regrouped():
    inter, halves = sinusoidal_table(20, 8), sinusoidal_table(20, 8, "halves")
    torch.testing.assert_close(halves[:, :4], inter[:, 0::2])
    torch.testing.assert_close(halves[:, 4:], inter[:, 1::2])


def test_positions_beyond_the_table_are_a_clear_error():
    for module in (SinusoidalPositions(8, 10), LearnedPositions(8, 10)):
        with pytest.raises(ValueError, match="max_positions=10"):
            module(torch.tensor([[0, 10]]))


def test_rope_scores_depend_only_on_relative_position():
    rope = RotaryEmbedding(8, 64)
    q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)

    def score(m, n):
        return (rope(q, torch.tensor([[m]])) * rope(k, torch.tensor([[n]]))).sum().item()

    assert score(3, 1) == pytest.approx(score(12, 10), abs=1e-5)
    assert score(0, 0) == pytest.approx((q * k).sum().item(), abs=1e-5)
    assert score(5, 1) != pytest.approx(score(5, 2), abs=1e-3)


def test_rope_rotates_interleaved_pairs_and_keeps_norms():
    rope = RotaryEmbedding(4, 16, base=10000.0)
    x = torch.tensor([[[[1.0, 0.0, 0.0, 1.0]]]])
    out = rope(x, torch.tensor([[2]]))
    theta0, theta1 = 2.0, 2.0 * 10000 ** (-2 / 4)
    expected = torch.tensor([math.cos(theta0), math.sin(theta0), -math.sin(theta1), math.cos(theta1)])
    torch.testing.assert_close(out.flatten(), expected)
    y = torch.randn(2, 3, 5, 4)
    torch.testing.assert_close(rope(y, torch.arange(5).expand(2, 5)).norm(dim=-1), y.norm(dim=-1))


def rotate_pairs_written_out(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """RoFormer's rotation as a loop over the pairs: (x[2i], x[2i+1]) by angle pos * base^(-2i/D)."""
    out = torch.empty_like(x)
    d = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    for i in range(d // 2):
        theta = positions.double() * inv_freq[i]  # (B, L)
        cos, sin = torch.cos(theta).float()[:, None].to(x.dtype), torch.sin(theta).float()[:, None].to(x.dtype)
        x1, x2 = x[..., 2 * i], x[..., 2 * i + 1]
        out[..., 2 * i] = x1 * cos - x2 * sin
        out[..., 2 * i + 1] = x1 * sin + x2 * cos
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rope_equals_the_written_out_rotation_bit_for_bit(dtype):
    rope = RotaryEmbedding(16, 64)
    x = torch.randn(3, 2, 7, 16).to(dtype)
    offsets = torch.tensor([0, 3, 50])[:, None]  # rows at different positions, as with left padding or a cache
    positions = offsets + torch.arange(7)
    assert torch.equal(rope(x, positions), rotate_pairs_written_out(x, positions))
    trained = x.clone().requires_grad_()  # training takes the rotation with its own backward
    assert torch.equal(rope(trained, positions), rotate_pairs_written_out(x, positions))


def test_rope_gradient():
    rope = RotaryEmbedding(8, 32)
    x = torch.randn(2, 2, 5, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: rope(t, torch.arange(5).expand(2, 5) + 3), (x,))


def test_rope_backward_equals_autograds_on_the_written_out_rotation():
    """float32, queries laid out as attention has them (a transposed view of (B, L, H, D))."""
    rope = RotaryEmbedding(64, 128)
    base = torch.randn(5, 11, 4 * 64)
    positions = torch.arange(11).expand(5, 11) + torch.tensor([[0], [2], [9], [30], [1]])
    grads = []
    for rotate in (rope, rotate_pairs_written_out):
        x = base.clone().requires_grad_()
        y = rotate(x.view(5, 11, 4, 64).transpose(1, 2), positions)
        y.backward(torch.linspace(-1, 1, y.numel()).view(y.shape))
        grads.append(x.grad)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-6, atol=1e-6)


def loop_bucket(relative: int, bidirectional: bool, buckets: int, max_distance: int) -> int:
    """T5's bucket of one relative position (key - query), written out: the first half of a direction's
    buckets are exact distances, the rest log-spaced up to max_distance (float32 logarithm, as T5)."""
    base = 0
    if bidirectional:
        buckets //= 2
        base = buckets if relative > 0 else 0
        distance = abs(relative)
    else:
        distance = max(-relative, 0)  # later keys: bucket 0
    exact = buckets // 2
    if distance < exact:
        return base + distance
    f32 = np.float32
    log_part = np.log(f32(distance) / f32(exact)) / f32(math.log(max_distance / exact)) * f32(buckets - exact)
    return base + min(exact + int(log_part), buckets - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("buckets, max_distance", [(32, 128), (8, 12), (16, 20), (4, 5)])
def test_relative_buckets_match_the_loop_around_every_boundary(bidirectional, buckets, max_distance):
    # Every distance up to 3 x max_distance both ways: the exact range, its boundary with the log
    # range, the log range's edges (where float32 decides), and beyond max_distance (the last bucket).
    relative = torch.arange(-3 * max_distance, 3 * max_distance + 1)
    got = relative_bucket(relative, bidirectional, buckets, max_distance).tolist()
    want = [loop_bucket(r, bidirectional, buckets, max_distance) for r in relative.tolist()]
    assert got == want
    half = buckets // 2 if bidirectional else buckets
    used = [b for b in range(buckets) if not (bidirectional and b == half)]  # "later, distance 0" cannot occur
    assert sorted(set(got)) == used
    far = relative_bucket(torch.tensor([-10_000, -max_distance]), bidirectional, buckets, max_distance)
    assert far.tolist() == [half - 1, half - 1]  # farther than max_distance: the last bucket
    if not bidirectional:  # the future (masked anyway) shares bucket 0 with distance 0
        assert relative_bucket(torch.tensor([0, 1, 50]), False, buckets, max_distance).tolist() == [0, 0, 0]


def test_relative_bias_is_one_scalar_per_head_and_bucket():
    bias = RelativePositionBias(n_heads=3, bidirectional=True, buckets=8, max_distance=16)
    positions = torch.arange(6)
    relative = (positions[None, :] - positions[:, None])[None]  # (1, T, S): key - query
    out = bias(relative)  # (1, H, T, S)
    assert out.shape == (1, 3, 6, 6)
    buckets = relative_bucket(relative[0], True, 8, 16)
    for h in range(3):
        torch.testing.assert_close(out[0, h], bias.table.weight[buckets, h])
    torch.testing.assert_close(out[0, :, 1, 2], out[0, :, 3, 4])  # depends on the distance only
