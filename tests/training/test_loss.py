"""Label-smoothed cross entropy (training/loss.py, §5.4): against the explicit distribution and the
textbook loss, gradients included."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from transformer.training.loss import label_smoothed_cross_entropy


def test_label_smoothing_matches_the_explicit_distribution():
    torch.manual_seed(0)
    V, pad, eps = 7, 0, 0.1
    logits = torch.randn(2, 5, V)
    target = torch.tensor([[3, 4, 5, 0, 0], [1, 2, 6, 6, 3]])
    out = label_smoothed_cross_entropy(logits, target, eps, pad)
    logp = logits.log_softmax(-1)
    expected = 0.0
    for b in range(2):
        for t in range(5):
            y = target[b, t].item()
            if y == pad:
                continue
            q = torch.full((V,), eps / (V - 2))
            q[pad], q[y] = 0.0, 1 - eps  # smoothing over the vocabulary minus padding
            expected += -(q * logp[b, t]).sum().item()
    assert out.n_tokens == 8
    assert out.loss.item() == pytest.approx(expected, rel=1e-5)
    nll = F.cross_entropy(
        logits.reshape(-1, V), target.reshape(-1), ignore_index=pad, reduction="sum"
    )
    assert out.nll.item() == pytest.approx(nll.item(), rel=1e-5)


def test_padding_targets_add_nothing_and_eps_zero_is_cross_entropy():
    torch.manual_seed(1)
    logits = torch.randn(1, 4, 9, requires_grad=True)
    target = torch.tensor([[5, 6, 0, 0]])
    out = label_smoothed_cross_entropy(logits, target, 0.1, pad_id=0)
    out.loss.backward()
    assert torch.all(logits.grad[0, 2:] == 0)  # padding positions get no gradient
    plain = label_smoothed_cross_entropy(logits, target, 0.0, pad_id=0)
    assert plain.loss.item() == pytest.approx(plain.nll.item())


def _textbook_smoothed_loss(
    logits: torch.Tensor, target: torch.Tensor, eps: float, pad: int
) -> torch.Tensor:
    """-sum q * log_softmax(logits) over non-padding rows, with q written out: the reference for the fused loss."""
    vocab = logits.size(-1)
    logp = logits.float().reshape(-1, vocab).log_softmax(-1)
    target = target.reshape(-1)
    q = torch.full_like(logp, eps / (vocab - 2))
    q[:, pad] = 0.0
    q[torch.arange(len(target)), target] = 1.0 - eps
    q[target == pad] = 0.0
    return -(q * logp).sum()


@pytest.mark.parametrize("path", ["chunked", "consumed", "whole"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_fused_loss_and_gradient_match_the_textbook(monkeypatch, dtype, eps, path):
    """chunked: the CPU's loop; consumed: the same, writing the gradient over the logits (as
    training does); whole: the GPU's whole-tensor function (_smoothed_rows), here uncompiled
    (tests/cuda runs it through torch.compile on a GPU)."""
    import transformer.training.loss as loss_module

    monkeypatch.setattr(
        loss_module, "CHUNK_ELEMENTS", 3 * 50
    )  # chunks of 3 rows: 13 rows end on a ragged chunk
    if path == "whole":
        monkeypatch.setattr(loss_module, "FUSED_DEVICES", ("cpu",))
        monkeypatch.setattr(loss_module, "_compiled_rows", loss_module._smoothed_rows)
    torch.manual_seed(2)
    V, pad = 50, 1
    logits = (torch.randn(13, V) * 4).to(dtype).reshape(1, 13, V).requires_grad_()
    target = torch.randint(0, V, (1, 13))
    target[0, [4, 11, 12]] = pad  # padding inside and at the end
    before = logits.detach().clone()
    if path == "consumed":  # the logits a layer made (not a leaf): its output is consumed
        source = before.clone().requires_grad_()
        made = source * 1.0
        out = label_smoothed_cross_entropy(made, target, eps, pad, consume_logits=True)
        (out.loss * 0.37).backward()
        fused_grad = source.grad
        assert not torch.equal(made.detach(), before)  # the buffer now holds the gradient
    else:
        out = label_smoothed_cross_entropy(logits, target, eps, pad)
        (out.loss * 0.37).backward()
        fused_grad, logits.grad = logits.grad, None
        assert torch.equal(logits.detach(), before)  # the logits are read, not overwritten
    reference = _textbook_smoothed_loss(logits, target, eps, pad)
    (reference * 0.37).backward()
    nll = F.cross_entropy(
        logits.detach().float().reshape(-1, V),
        target.reshape(-1),
        ignore_index=pad,
        reduction="sum",
    )
    assert out.n_tokens == 10
    assert out.loss.dtype == out.nll.dtype == torch.float32
    assert out.loss.item() == pytest.approx(reference.item(), rel=1e-5)
    assert out.nll.item() == pytest.approx(nll.item(), rel=1e-5)
    assert fused_grad.dtype == dtype
    assert torch.all(fused_grad[0, [4, 11, 12]] == 0)  # padding rows get no gradient
    tolerance = (
        {"atol": 1e-6, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 2e-3, "rtol": 1e-2}
    )
    torch.testing.assert_close(fused_grad.float(), logits.grad.float(), **tolerance)
    with torch.no_grad():  # the forward-only path (validation) gives the same sums
        again = label_smoothed_cross_entropy(logits, target, eps, pad)
    assert again.loss.item() == pytest.approx(out.loss.item(), rel=1e-6)
    assert again.nll.item() == pytest.approx(out.nll.item(), rel=1e-6)


def test_fused_loss_refuses_a_second_backward_pass_with_a_clear_error():
    logits = torch.randn(3, 6, requires_grad=True)
    out = label_smoothed_cross_entropy(logits, torch.tensor([1, 2, 3]), 0.1, pad_id=0)
    out.loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backward ran twice through the same loss"):
        out.loss.backward()


def test_consumed_logits_that_an_operation_saved_fail_loudly_not_silently():
    """tanh saves its output for its backward: writing the gradient over that output must raise
    autograd's in-place error, not give a wrong gradient."""
    source = torch.randn(4, 9, requires_grad=True)
    logits = torch.tanh(source)
    out = label_smoothed_cross_entropy(
        logits, torch.tensor([1, 2, 0, 3]), 0.1, 0, consume_logits=True
    )
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.loss.backward()


def _whole_tensor_path_on_the_cpu(monkeypatch):
    """The GPU's whole-tensor path (_smoothed_rows), uncompiled, on the CPU."""
    import transformer.training.loss as loss_module

    monkeypatch.setattr(loss_module, "FUSED_DEVICES", ("cpu",))
    monkeypatch.setattr(loss_module, "_compiled_rows", loss_module._smoothed_rows)


@pytest.mark.parametrize("combined", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_folded_scale_gives_the_scaled_gradient_with_or_without_the_backward_pass(
    monkeypatch, dtype, combined
):
    """folding(s): the whole-tensor path writes s x the gradient. backward_scaled(loss, s) hands it
    on as it is; a loss combined with other terms first (combined) still gets the right gradient,
    the fold undone in the backward's factor."""
    from transformer.training.loss import _SmoothedCrossEntropy, backward_scaled, folding

    _whole_tensor_path_on_the_cpu(monkeypatch)
    torch.manual_seed(3)
    V, pad, eps, scale = 40, 0, 0.1, 1 / 7
    logits = (torch.randn(11, V) * 3).to(dtype).requires_grad_()
    target = torch.randint(1, V, (11,))
    target[[2, 9]] = pad
    with folding(scale):
        out = label_smoothed_cross_entropy(logits, target, eps, pad)
    assert isinstance(out.loss.grad_fn, _SmoothedCrossEntropy._backward_cls)
    assert out.loss.grad_fn.folded == scale
    if combined:
        (0.25 * out.loss * scale).backward()
        factor = 0.25 * scale
    else:
        backward_scaled(out.loss, scale)
        factor = scale
        assert out.loss.grad_fn.exact  # no pass over the gradient
    reference = _textbook_smoothed_loss(logits, target, eps, pad)
    grad = torch.autograd.grad(reference * factor, logits)[0]
    assert out.loss.item() == pytest.approx(reference.item(), rel=1e-5)  # the value is not scaled
    tolerance = (
        {"atol": 1e-7, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 1e-3, "rtol": 1e-2}
    )
    torch.testing.assert_close(logits.grad.float(), grad.float(), **tolerance)
    assert torch.all(logits.grad[[2, 9]] == 0)


def test_loss_and_backward_on_the_cpu_is_the_plain_scaled_backward_bit_for_bit():
    """The CPU folds nothing: loss_and_backward gives (loss x s).backward()'s gradient exactly, and
    with a GradScaler enabled it goes through the scaler."""
    from transformer.training.loss import loss_and_backward

    torch.manual_seed(4)
    logits = torch.randn(9, 30)
    target = torch.randint(1, 30, (9,))
    grads = []
    for way in ("plain", "helper"):
        x = logits.clone().requires_grad_()

        def loss_fn(x=x):
            return label_smoothed_cross_entropy(x * 1.0, target, 0.1, 0, consume_logits=True)

        if way == "plain":
            (loss_fn().loss * (1 / 13)).backward()
        else:
            scaler = torch.amp.GradScaler("cpu", enabled=False)
            out = loss_and_backward(loss_fn, (), 1 / 13, scaler)
            assert out.loss.grad_fn.folded is None
        grads.append(x.grad)
    assert torch.equal(grads[0], grads[1])
    x = logits.clone().requires_grad_()
    scaler = torch.amp.GradScaler("cpu", enabled=True, init_scale=8.0)
    loss_and_backward(lambda: label_smoothed_cross_entropy(x, target, 0.1, 0), (), 1 / 13, scaler)
    torch.testing.assert_close(x.grad, grads[0] * 8.0)
