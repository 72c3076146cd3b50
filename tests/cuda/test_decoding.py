"""Greedy and beam search on the device give the CPU's outputs token for token, in float32.

A random model's next-token choices hold near-ties that float rounding (another device, other
kernels) can flip; a model trained on a task decides by wide margins. So a tiny model first learns
to reverse sequences on the CPU (a few hundred steps, module-scoped), then a copy of it decodes on
the device.

Legend (model/__init__.py): B batch, S source length, T target length, V vocabulary.
"""

from __future__ import annotations

import copy

import pytest
import torch

import transformer as T
from transformer.config import cpu_tiny
from transformer.training.loss import label_smoothed_cross_entropy

pytestmark = pytest.mark.cuda

PAD, START, EOS, V = 0, 2, 3, 16  # symbols are 4..15
MAX_LEN, STEPS = 8, 300
SOURCES = [
    [5, 6, 7, 8, 9, 10, 11, 12],
    [13, 4, 5],
    [7, 7, 9, 14, 15, 4],
    [6, 9],
    [9, 8, 7, 6, 5],
    [15, 14, 13, 12, 11, 10, 9],
]
MIN_MARGIN = 1e-2
"""The least gap between the best and second-best logit at any step of the CPU's greedy output:
fp32 rounding on another device moves logits by ~1e-5."""


def reverse_batch(gen: torch.Generator, n: int) -> tuple[torch.Tensor, ...]:
    """n random sources of 2..MAX_LEN symbols (B, S) and their reversal: decoder input <s> y and
    output y </s> (B, S + 1), all right-padded."""
    lengths = torch.randint(2, MAX_LEN + 1, (n,), generator=gen)
    symbols = torch.randint(4, V, (n, MAX_LEN), generator=gen)
    real = torch.arange(MAX_LEN)[None] < lengths[:, None]  # (B, S)
    src = symbols.masked_fill(~real, PAD)
    reverse = torch.stack(
        [torch.cat([s[:k].flip(0), s[k:]]) for s, k in zip(src, lengths, strict=True)]
    )
    tgt_out = torch.cat([reverse, torch.full((n, 1), PAD)], dim=1)
    tgt_out[torch.arange(n), lengths] = EOS
    tgt_in = torch.cat([torch.full((n, 1), START), tgt_out[:, :-1]], dim=1)
    return src, tgt_in.masked_fill(tgt_out == PAD, PAD), tgt_out


@pytest.fixture(scope="module")
def trained() -> torch.nn.Module:
    """A 2+2-layer d_model 32 model that reverses sequences, trained on the CPU (fixed seeds)."""
    torch.manual_seed(0)
    model = T.build_model(cpu_tiny(vocab_size=V, d_model=32, d_ff=64, norm_position="pre")).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(0)
    for _ in range(STEPS):
        src, tgt_in, tgt_out = reverse_batch(gen, 64)
        out = label_smoothed_cross_entropy(model(src, tgt_in), tgt_out, 0.0, PAD)
        (out.loss / out.n_tokens).backward()
        optimizer.step()
        optimizer.zero_grad()
    return model.eval()


def margins(model: torch.nn.Module, output: torch.Tensor) -> torch.Tensor:
    """The gap between the best and second-best logit at each step that made `output` (B, T)
    (</s> included), teacher-forced on the CPU."""
    src = torch.tensor([s + [PAD] * (MAX_LEN - len(s)) for s in SOURCES])
    lengths = (output != PAD).sum(dim=1)  # (B,)
    tgt_in = torch.cat([torch.full((len(SOURCES), 1), START), output], dim=1)
    with torch.no_grad():
        top2 = model(src, tgt_in).topk(2, dim=-1).values  # (B, T + 1, 2)
    gap = top2[..., 0] - top2[..., 1]
    steps = torch.arange(tgt_in.shape[1])[None] <= lengths[:, None]  # each row's steps to </s>
    return gap[steps]


def test_greedy_and_beam_search_on_the_device_equal_the_cpu(trained, device):
    # fp32 matmuls, not TF32 (torch's default; conftest makes sure and restores the setting after)
    assert torch.get_float32_matmul_precision() == "highest"
    on_device = copy.deepcopy(trained).to(device)
    greedy, greedy_scores = T.greedy_search(trained, SOURCES, return_scores=True)
    assert margins(trained, greedy).min() > MIN_MARGIN  # no near-tie to flip
    ids, scores = T.greedy_search(on_device, SOURCES, return_scores=True)
    assert ids.device.type == device.type
    assert ids.tolist() == greedy.tolist()
    torch.testing.assert_close(scores.cpu(), greedy_scores, rtol=1e-4, atol=1e-3)

    beam, beam_scores = T.beam_search(trained, SOURCES, beam_size=4, return_scores=True)
    ids, scores = T.beam_search(on_device, SOURCES, beam_size=4, return_scores=True)
    assert ids.tolist() == beam.tolist()
    torch.testing.assert_close(scores.cpu(), beam_scores, rtol=1e-4, atol=1e-3)
