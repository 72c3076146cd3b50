"""The label-smoothed loss on the device: torch.compile's fused rows (training/loss.py,
_smoothed_rows) against the CPU's chunked loop in float64, for the sums and the gradient, with
padding rows, in fp32 and bf16 logits, for batches of several sizes (one compilation with dynamic
shapes serves them all)."""

from __future__ import annotations

import pytest
import torch

from tests.cuda.common import assert_rel_close
from transformer.training.loss import label_smoothed_cross_entropy

pytestmark = pytest.mark.cuda


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_the_fused_loss_on_the_device_matches_the_cpu_loop(device, dtype, eps):
    torch.manual_seed(7)
    vocab, pad = 997, 0
    for rows in (64, 300, 1031):
        logits = (torch.randn(rows, vocab) * 3).to(dtype)
        target = torch.randint(1, vocab, (rows,))
        target[::7] = pad
        ref_logits = logits.double().requires_grad_()
        ref = label_smoothed_cross_entropy(ref_logits, target, eps, pad)
        ref.loss.backward()
        ours_logits = logits.to(device).requires_grad_()
        ours = label_smoothed_cross_entropy(ours_logits, target.to(device), eps, pad)
        ours.loss.backward()
        assert ours.n_tokens == ref.n_tokens
        tol = 1e-5 if dtype == torch.float32 else 1e-3  # the sums are in float32 either way
        assert ours.loss.item() == pytest.approx(ref.loss.item(), rel=tol)
        assert ours.nll.item() == pytest.approx(ref.nll.item(), rel=tol)
        assert ours_logits.grad.dtype == dtype
        grad_tol = 1e-5 if dtype == torch.float32 else 1e-2  # bf16 rounds the stored gradient
        assert_rel_close(ours_logits.grad, ref_logits.grad, grad_tol, f"gradient, {rows} rows")
        assert torch.all(ours_logits.grad[::7].float() == 0)  # padding rows: no gradient


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_folded_scale_on_the_device_gives_the_scaled_gradient(device, dtype):
    """folding(s) + backward_scaled (what the loop does without a GradScaler): the compiled rows
    write s x the gradient and the backward hands it on as it is (on the GPU: no pass over it);
    the gradient is the CPU loop's times s, in float64."""
    from transformer.training.loss import backward_scaled, folding

    torch.manual_seed(8)
    vocab, pad, scale = 997, 0, 1 / 4133
    for rows in (64, 1031):
        logits = (torch.randn(rows, vocab) * 3).to(dtype)
        target = torch.randint(1, vocab, (rows,))
        target[::5] = pad
        ref_logits = logits.double().requires_grad_()
        ref = label_smoothed_cross_entropy(ref_logits, target, 0.1, pad)
        (ref.loss * scale).backward()
        ours_logits = logits.to(device).requires_grad_()
        with folding(scale):
            ours = label_smoothed_cross_entropy(ours_logits, target.to(device), 0.1, pad)
        node = ours.loss.grad_fn
        backward_scaled(ours.loss, scale)
        assert node.exact == (device.type == "cuda")  # the CPU folds nothing
        tol = 1e-5 if dtype == torch.float32 else 1e-3
        assert ours.loss.item() == pytest.approx(ref.loss.item(), rel=tol)  # the value unscaled
        grad_tol = 1e-5 if dtype == torch.float32 else 1e-2
        assert_rel_close(ours_logits.grad, ref_logits.grad, grad_tol, f"folded gradient, {rows}")
        assert torch.all(ours_logits.grad[::5].float() == 0)
