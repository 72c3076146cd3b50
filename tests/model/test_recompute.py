"""Activation checkpointing (model/stacks.Stack.recompute, train.activation_checkpointing): the
loss and every gradient equal the plain backward's, dropout included, for the encoder-decoder
(padding masks) and a decoder-only model; it is off outside training."""

from __future__ import annotations

import pytest
import torch

from transformer import ModelConfig, build_model
from transformer.model.stacks import Stack


def grads(model, run) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    torch.manual_seed(5)  # the same dropout masks for both runs
    loss = run(model)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("arch", ["encoder-decoder", "decoder"])
def test_gradients_equal_the_plain_backward(arch):
    cfg = ModelConfig(arch=arch, vocab_size=40, d_model=32, n_heads=4, n_encoder_layers=2,
                      n_decoder_layers=2, d_ff=64, dropout=0.2, attention_dropout=0.1,
                      norm_position="pre", max_positions=32)
    torch.manual_seed(0)
    model = build_model(cfg).train()
    src = torch.randint(4, 40, (3, 9))
    src[0, 6:] = cfg.pad_id  # padding
    tgt = torch.randint(4, 40, (3, 7))
    if arch == "decoder":
        run = lambda m: m(tgt).square().mean()
    else:
        run = lambda m: m(src, tgt).square().mean()
    calls = []
    stacks = [m for m in model.modules() if isinstance(m, Stack)]
    for stack in stacks:
        for layer in stack.layers:
            layer.register_forward_pre_hook(lambda *_: calls.append(1))
    loss, expect = grads(model, run)
    plain = len(calls)
    for stack in stacks:
        stack.recompute = True
    got_loss, got = grads(model, run)
    assert len(calls) - plain == 2 * plain  # each layer ran again in the backward pass
    torch.testing.assert_close(got_loss, loss)
    assert got.keys() == expect.keys()
    for name in expect:
        torch.testing.assert_close(got[name], expect[name], rtol=1e-5, atol=1e-6, msg=name)
    model.eval()  # off outside training: each layer runs once, gradient or not
    calls.clear()
    run(model).backward()
    assert len(calls) == plain
