"""Position encodings: §3.5's formula, the halves layout, RoPE's relative-position property."""

import math

import pytest
import torch

from transformer.model.positional import (
    LearnedPositions,
    RotaryEmbedding,
    SinusoidalPositions,
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
