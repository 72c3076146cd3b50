"""The CPU dropout (transformer.model.layers.cpu_dropout) against the textbook one."""

import pytest
import torch
from torch import nn

from transformer.model.layers import KEEP_BITS, cpu_dropout, dropped


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_keeps_each_element_with_probability_one_minus_p(p):
    """Per lane too: each 64-bit draw feeds four elements, so element i % 4 is one lane of it; a lane
    whose sign bit were read would keep ~half as often as the others."""
    n = 400_003  # not a multiple of 4: the last draw is only partly used
    y = cpu_dropout(torch.ones(n), p)
    kept = y != 0
    sd = (p * (1 - p) / (n / 4)) ** 0.5
    for lane in range(4):
        assert abs(kept[lane::4].float().mean().item() - (1 - p)) < 5 * sd, lane
    # the survivors are scaled so that the mean is unchanged; the quantised p (2^-15) is the only bias
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 1 / (1 - p)))
    assert abs(round(p * 2 ** KEEP_BITS) / 2 ** KEEP_BITS - p) <= 2 ** -(KEEP_BITS + 1)


def test_neighbouring_elements_are_independent():
    """Two elements from one draw are kept together with probability (1 - p)^2."""
    p = 0.5
    kept = cpu_dropout(torch.ones(800_000), p).view(-1, 4) != 0
    for a, b in ((0, 1), (1, 2), (2, 3), (0, 3)):
        both = (kept[:, a] & kept[:, b]).float().mean().item()
        assert abs(both - (1 - p) ** 2) < 0.01, (a, b)


def test_gradient_is_the_forward_mask_scaled():
    x = torch.randn(3, 7, 5, requires_grad=True)
    y = cpu_dropout(x, 0.25)
    g = torch.randn_like(y)
    y.backward(g)
    keep = (y != 0).float()
    torch.testing.assert_close(y, x.detach() * keep / 0.75)
    torch.testing.assert_close(x.grad, g * keep / 0.75)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_survivors_are_x_over_one_minus_p_rounded_once(dtype):
    """float32 scales by a mask that carries 1 / (1 - p); bf16 multiplies by the unrounded scale
    (a bf16 1 / 0.9 would shift every survivor's mean by 0.15%)."""
    x = torch.randn(64, 33).to(dtype)
    y = cpu_dropout(x, 0.1)
    kept = y != 0
    expected = (x.float() * (1.0 / 0.9)).to(dtype) if dtype == torch.bfloat16 else x * (1.0 / 0.9)
    assert torch.equal(y[kept], expected[kept])
    assert y.dtype == dtype and 0 < kept.sum() < x.numel()


def test_seeded_by_the_global_generator_and_by_an_explicit_one():
    """The default generator decides (torch.manual_seed, exact resume); a given generator is used instead."""
    x = torch.ones(1000)
    torch.manual_seed(3)
    a = cpu_dropout(x, 0.1)
    torch.manual_seed(3)
    assert torch.equal(cpu_dropout(x, 0.1), a)
    state = torch.get_rng_state()
    b = cpu_dropout(x, 0.1, generator=torch.Generator().manual_seed(3))
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(cpu_dropout(x, 0.1, generator=torch.Generator().manual_seed(3)), b)
    assert not torch.equal(a, cpu_dropout(x, 0.1))


def test_dtype_shape_and_edges():
    x = torch.randn(5, 9, dtype=torch.bfloat16)
    y = cpu_dropout(x, 0.2)
    assert y.dtype == torch.bfloat16 and y.shape == x.shape
    nc = torch.randn(6, 4).t()  # not contiguous
    assert cpu_dropout(nc, 0.3).shape == (4, 6)
    assert torch.equal(cpu_dropout(x, 1.0), torch.zeros_like(x))
    assert torch.equal(cpu_dropout(x, 0.0), x)
    assert cpu_dropout(torch.ones(0), 0.5).numel() == 0
    with pytest.raises(ValueError, match=r"dropout probability must be in \[0, 1\], got 1.5"):
        cpu_dropout(x, 1.5)


def test_dropped_is_the_identity_in_eval_and_at_zero_and_cpu_dropout_in_training():
    x = torch.randn(4, 8)
    module = nn.Dropout(0.4)
    module.eval()
    assert dropped(module, x) is x
    assert dropped(nn.Dropout(0.0), x) is x
    module.train()
    torch.manual_seed(0)
    y = dropped(module, x)
    torch.manual_seed(0)
    assert torch.equal(y, cpu_dropout(x, 0.4))
