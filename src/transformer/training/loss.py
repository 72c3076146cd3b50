"""Label-smoothed cross entropy (§5.4: label smoothing of value eps_ls = 0.1).

The true class gets probability 1 - eps; eps is spread evenly over the vocabulary minus the
padding token and the true class (V - 2 entries): that is the target distribution q of a
position. Positions whose target is padding add nothing. Sums are returned, not means, so the
caller can normalise by the token count of the whole (accumulated, all-rank) batch.

Fused, in float32 whatever the logits' dtype (autocast-safe). With lse = logsumexp(x) over a
row of logits x and t its target:
    nll    = lse - x_t
    smooth = (1 - eps) * nll + eps / (V - 2) * sum_{j not t, pad} (lse - x_j)
           = (1 - eps) * nll + eps / (V - 2) * ((V - 2) * lse - (sum_j x_j - x_t - x_pad))
    d smooth / d x = softmax(x) - q
The forward pass works through the rows in cache-sized chunks and, when a gradient is wanted,
writes softmax(x) - q for each chunk while it is at hand; the backward pass only scales it.
One exp per logit instead of autograd's two (log_softmax and its backward), and no (N, V)
float32 log-probabilities, gather gradient or sum gradient. benchmarks/loss_speed.py measures it
against the unfused loss on the recipe's batch shapes (results, dated: docs/benchmarks/training.md).
On a GPU the same sums and gradient come from _smoothed_rows through torch.compile, which fuses
them into two passes over the logits (the chunked loop there would be about ten). There the
factor the loss is back-propagated with (1 / the step's token count) can be folded into that
gradient as it is written (folding, backward_scaled, loss_and_backward: what the training loop
does without a GradScaler), which spares the backward its own pass over the (N, V) gradient.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

CHUNK_ELEMENTS = 1 << 20
"""Logits per chunk on the CPU (4 MB in float32: stays in cache between the passes over a chunk)."""


@dataclass
class LossSums:
    """Summed over real target tokens: the smoothed loss (to optimise), the NLL (to report), and
    the count."""

    loss: torch.Tensor  # () smoothed cross entropy, summed
    nll: torch.Tensor  # () negative log-likelihood of the targets, summed (no gradient)
    n_tokens: int


def _smoothed_sums(
    logits: torch.Tensor,
    target: torch.Tensor,
    epsilon: float,
    pad_id: int,
    grad: torch.Tensor | None,
    ignore_id: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """logits (N, V), target (N,) -> (summed smoothed loss, summed NLL) over non-padding rows, in
    float32.

    With grad (N, V) given, also writes d(smoothed sum)/d logits into it (zero on padding rows).
    ignore_id: the target that marks a row as padding (None: pad_id; -1: none is).
    """
    ignore_id = pad_id if ignore_id is None else ignore_id
    n, vocab = logits.shape
    other = epsilon / (vocab - 2) if epsilon > 0 else 0.0
    rows = n if logits.device.type != "cpu" else max(1, CHUNK_ELEMENTS // vocab)
    loss = torch.zeros((), dtype=torch.float32, device=logits.device)
    nll_sum = torch.zeros_like(loss)
    in_place = grad is logits and logits.dtype == torch.float32  # the gradient replaces the logits
    for a in range(0, n, rows):
        # (R, V) worked on in place: the logits themselves when they are to become the gradient
        x = logits[a : a + rows] if in_place else logits[a : a + rows].to(torch.float32, copy=True)
        t = target[a : a + rows]  # (R,)
        keep = (t != ignore_id).float()  # (R,)
        x_t = x.gather(1, t[:, None]).squeeze(1)  # (R,)
        peak = x.amax(dim=1)  # (R,)
        if epsilon > 0:
            rest = (
                x.sum(dim=1) - x_t - x[:, pad_id]
            )  # (R,) sum of the logits off the target and padding
        x.sub_(peak[:, None]).exp_()  # (R, V) exp(x - max)
        total = x.sum(dim=1)  # (R,)
        lse = peak + total.log()  # (R,)
        nll = lse - x_t
        smooth = (1.0 - epsilon) * nll + other * ((vocab - 2) * lse - rest) if epsilon > 0 else nll
        loss += (smooth * keep).sum()
        nll_sum += (nll * keep).sum()
        if grad is not None:
            x.mul_((keep / total)[:, None])  # softmax(x), zero on padding rows
            index = torch.arange(x.size(0), device=x.device)
            if epsilon > 0:
                x.sub_(
                    (other * keep)[:, None]
                )  # minus q: eps / (V - 2) off the target and padding,
                x[:, pad_id] += other * keep  # 0 at padding,
                x[index, t] -= (1.0 - epsilon - other) * keep  # 1 - eps at the target
            else:
                x[index, t] -= keep
            if not in_place:
                grad[a : a + rows] = x
    return loss, nll_sum


def _smoothed_rows(
    logits: torch.Tensor,
    target: torch.Tensor,
    epsilon: float,
    pad_id: int,
    weight: torch.Tensor | None = None,
    ignore_id: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """_smoothed_sums with its gradient, in whole-tensor operations only (no chunks, nothing in
    place), for torch.compile to fuse: on a GPU, where the chunked loop is about ten passes over
    the (N, V) logits in memory, the compiled function is one read for the row statistics and one
    read and write for the gradient. weight (N,): each row's factor on the gradient (default: 1 on
    real rows, 0 on padding; a folded scale multiplies it, for free). Returns (summed smoothed loss,
    summed NLL, d loss / d logits x weight in the logits' dtype)."""
    vocab = logits.size(1)
    other = epsilon / (vocab - 2) if epsilon > 0 else 0.0
    x = logits.float()  # (N, V)
    keep = (target != (pad_id if ignore_id is None else ignore_id)).float()  # (N,)
    peak = x.amax(dim=1, keepdim=True)  # (N, 1)
    e = torch.exp(x - peak)
    total = e.sum(dim=1, keepdim=True)
    lse = (peak + total.log()).squeeze(1)  # (N,)
    x_t = x.gather(1, target[:, None]).squeeze(1)
    nll = lse - x_t
    cols = torch.arange(vocab, device=x.device)[None, :]  # (1, V)
    is_target = cols == target[:, None]  # (N, V)
    if epsilon > 0:
        rest = x.sum(dim=1) - x_t - x[:, pad_id]
        smooth = (1.0 - epsilon) * nll + other * ((vocab - 2) * lse - rest)
        q = torch.where(is_target, 1.0 - epsilon, torch.where(cols == pad_id, 0.0, other))
    else:
        smooth, q = nll, is_target.float()
    weight = keep if weight is None else weight
    grad = (e / total - q) * weight[:, None]  # softmax(x) - q, zero on padding rows
    return (smooth * keep).sum(), (nll * keep).sum(), grad.to(logits.dtype)


_compiled_rows = None


def _fused_rows(logits, target, epsilon, pad_id, weight=None, ignore_id=None):
    """_smoothed_rows through torch.compile (compiled once, for any number of rows)."""
    global _compiled_rows
    if _compiled_rows is None:
        _compiled_rows = torch.compile(_smoothed_rows, dynamic=True)
    if weight is None:
        return _compiled_rows(logits, target, epsilon, pad_id, None, ignore_id)
    return _compiled_rows(logits, target, epsilon, pad_id, weight, ignore_id)


FUSED_DEVICES = ("cuda",)
"""Where the loss with a gradient goes through _fused_rows (torch.compile); the CPU keeps the
chunked loop, which stays in cache and needs no compiler."""

_folded_scale: list[float | None] = [None]  # the scale of the innermost folding() block


@contextlib.contextmanager
def folding(scale: float | None):
    """Inside: a loss with a gradient on a fused device (FUSED_DEVICES) computed with its gradient
    multiplied by `scale` (the factor the caller will back-propagate the loss with, e.g. 1 / the
    step's token count), for free inside the pass that writes it. backward_scaled(loss, scale) then
    skips the backward's separate scaling pass over the (N, V) gradient. The loss's value is not
    scaled; on the CPU nothing changes (bit for bit). None: no folding."""
    _folded_scale.append(scale)
    try:
        yield
    finally:
        _folded_scale.pop()


def backward_scaled(loss: torch.Tensor, scale: float) -> None:
    """Back-propagate loss * scale. Where `loss` is a label-smoothed sum made under
    folding(scale), its gradient already holds the factor: backward runs from the loss itself and
    its (N, V) gradient is handed on as it is, with no pass over it. Else
    (loss * scale).backward()."""
    node = loss.grad_fn
    if isinstance(node, _SmoothedCrossEntropy._backward_cls) and node.folded == scale:
        node.exact = True  # d objective / d loss is exactly 1: the gradient needs no multiplying
        loss.backward()
    else:
        (loss * scale).backward()


def loss_and_backward(loss_fn, args: tuple, scale: float, scaler: torch.amp.GradScaler):
    """out = loss_fn(*args) (an objective's loss: out.loss a summed loss), then out.loss * scale
    back-propagated, through `scaler` where it is enabled (fp16), else with the scale folded into
    the label-smoothed loss's gradient (folding; on the CPU exactly (out.loss * scale).backward()).
    Returns out."""
    fold = None if scaler.is_enabled() else scale
    with folding(fold):
        out = loss_fn(*args)
    if fold is None:
        scaler.scale(out.loss * scale).backward()
    else:
        backward_scaled(out.loss, scale)
    return out


class _SmoothedCrossEntropy(torch.autograd.Function):
    """(N, V) logits, (N,) targets -> (summed smoothed loss, summed NLL); gradient through the
    first only."""

    @staticmethod
    def forward(
        ctx,
        logits: torch.Tensor,
        target: torch.Tensor,
        epsilon: float,
        pad_id: int,
        consume: bool,
        ignore_id: int,
    ):
        ctx.folded, ctx.exact = None, False
        if logits.device.type in FUSED_DEVICES:
            scale, weight = _folded_scale[-1], None
            if scale is not None:  # (N,) the folded scale on real rows, 0 on padding
                weight = (target != ignore_id).float().mul_(scale)
                ctx.folded = scale
            loss, nll, ctx.grad = _fused_rows(logits, target, epsilon, pad_id, weight, ignore_id)
            ctx.mark_non_differentiable(nll)
            return loss, nll
        # (N, V) d loss / d logits, in the logits' dtype: written over the logits when the caller
        # consumes them (no second (N, V) buffer, no copy); an operation that saved the logits for
        # its own backward would then fail loudly there (autograd's version check), never silently
        ctx.grad = logits if consume else torch.empty_like(logits)
        loss, nll = _smoothed_sums(logits, target, epsilon, pad_id, ctx.grad, ignore_id)
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor, grad_nll: torch.Tensor):
        grad, ctx.grad = ctx.grad, None
        if grad is None:
            raise RuntimeError(
                "label_smoothed_cross_entropy: backward ran twice through the same loss; "
                "compute the loss again for a second backward pass"
            )
        if ctx.exact:  # backward_scaled: the folded scale is the whole factor
            return grad, None, None, None, None, None
        if ctx.folded is not None:  # folded, then scaled otherwise: undo the fold in the factor
            grad_loss = grad_loss / ctx.folded
        return grad.mul_(grad_loss), None, None, None, None, None


def label_smoothed_cross_entropy(
    logits: torch.Tensor,
    target: torch.Tensor,
    epsilon: float,
    pad_id: int,
    n_tokens: int | None = None,
    consume_logits: bool = False,
    ignore_id: int | None = None,
) -> LossSums:
    """logits (B, T, V) or (N, V), target (B, T) or (N,) -> summed losses over non-padding
    targets.

    n_tokens: the count of non-padding targets when the caller knows it (a batch counts them on
    the CPU); else it is counted here, which on a GPU waits for the forward pass to finish.
    consume_logits: the caller has no further use for the logits, so on the CPU the gradient is
    written over them (a training step's logits are tens of MB: no copy of them, no second
    buffer); they then hold the gradient, not the logits.
    ignore_id: the target that marks padding rows (None: pad_id; -1: no row is padding, as when the
    caller has picked the rows and the padding id is a real token, a chat model's end of turn).
    pad_id's column still takes no share of the smoothing."""
    ignore_id = pad_id if ignore_id is None else ignore_id
    vocab = logits.size(-1)
    if epsilon > 0 and vocab <= 2:
        raise ValueError(f"label smoothing needs a vocabulary of more than 2 tokens, got {vocab}")
    target = target.reshape(-1)  # (N,)
    flat = logits.reshape(-1, vocab)  # (N, V)
    if torch.is_grad_enabled() and logits.requires_grad:
        loss, nll = _SmoothedCrossEntropy.apply(
            flat, target, float(epsilon), pad_id, consume_logits, ignore_id
        )
    else:
        loss, nll = _smoothed_sums(flat.detach(), target, float(epsilon), pad_id, None, ignore_id)
    if n_tokens is None:
        n_tokens = int((target != ignore_id).sum().item())
    return LossSums(loss, nll, n_tokens)
