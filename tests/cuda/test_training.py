"""Training on the device: one step equals the CPU's (loss, gradients, the fused AdamW update), and
the real trainer (training/trainer.py) resumes a run on the device where the uninterrupted run
went, step for step.

Legend (model/__init__.py): B batch, S source length, T target length, V vocabulary.
"""

from __future__ import annotations

import copy
import json

import pytest
import torch

import transformer as T
from tests.cuda.common import assert_rel_close
from tests.training.conftest import Runs, tiny_config
from transformer.config import cpu_tiny
from transformer.training.checkpoint import step_dirs
from transformer.training.loss import label_smoothed_cross_entropy, loss_and_backward
from transformer.training.trainer import train

pytestmark = pytest.mark.cuda

PAD, V = 0, 50
LLAMA_LAYOUT = dict(
    positional="rope",
    n_kv_heads=2,
    norm="rmsnorm",
    norm_position="pre",
    activation="swiglu",
    tie_embeddings=False,
)


def padded(gen: torch.Generator, lengths: list[int], first: int | None = None) -> torch.Tensor:
    """Random ids (B, max(lengths)) right-padded with PAD; `first` replaces each row's first id."""
    ids = torch.randint(4, V, (len(lengths), max(lengths)), generator=gen)
    if first is not None:
        ids[:, 0] = first
    real = torch.arange(max(lengths))[None] < torch.tensor(lengths)[:, None]
    return ids.masked_fill(~real, PAD)


def step_loss(
    model: torch.nn.Module, batch: dict[str, torch.Tensor], device, fold: bool = False
) -> torch.Tensor:
    """The seq2seq or language-model objective's loss of a batch, per target token, backward done
    (training/objectives: the summed label-smoothed loss over the batch's target count). fold:
    through loss_and_backward as the loop does (on a GPU the 1 / count folded into the loss's
    gradient)."""
    b = {k: v.to(device) for k, v in batch.items()}
    n_tokens = int((batch["tgt_out"] != PAD).sum())

    def loss_sums():
        if "src" in b:
            logits = model(b["src"], b["tgt_in"], src_mask=b["src"] != PAD)
        else:
            logits = model(b["tgt_in"], b["tgt_in"] != PAD)
        return label_smoothed_cross_entropy(logits, b["tgt_out"], 0.1, PAD, n_tokens)

    if fold:
        unscaled = torch.amp.GradScaler(torch.device(device).type, enabled=False)
        out = loss_and_backward(loss_sums, (), 1 / n_tokens, unscaled)
        return out.loss.detach() / n_tokens
    loss = loss_sums().loss / n_tokens
    loss.backward()
    return loss.detach()


@pytest.mark.parametrize("fold", [False, True], ids=["scaled", "folded"])
@pytest.mark.parametrize(
    "arch,changes",
    [("encoder-decoder", {}), ("decoder", LLAMA_LAYOUT)],
    ids=["enc-dec", "decoder-llama"],
)
def test_one_training_step_on_the_device_equals_the_cpu(arch, changes, fold, device):
    """Same model, batch and seed, dropout 0: the loss and every gradient agree to fp32 rounding
    (relative 1e-5 and 1e-4 of each tensor's largest: other summation orders), and so do the
    weights after one fused AdamW step from the same gradients. folded: the device's backward
    through loss_and_backward (the loop's; the scale folded into the loss's gradient there)."""
    torch.manual_seed(0)
    cpu = T.build_model(cpu_tiny(vocab_size=V, arch=arch, dropout=0.0, **changes)).train()
    dev = copy.deepcopy(cpu).to(device)
    gen = torch.Generator().manual_seed(0)
    tgt = padded(gen, [11, 7, 9, 3, 10, 5], first=2)  # <s> y, right-padded
    batch = {"tgt_in": tgt[:, :-1], "tgt_out": tgt[:, 1:]}
    if arch == "encoder-decoder":
        batch["src"] = padded(gen, [13, 4, 8, 13, 1, 9])
    ours = step_loss(dev, batch, device, fold)
    assert_rel_close(ours, step_loss(cpu, batch, "cpu"), 1e-5, "loss")
    largest = max(q.grad.abs().max().item() for q in cpu.parameters())
    for (name, p), q in zip(dev.named_parameters(), cpu.parameters(), strict=True):
        assert p.grad.device.type == device.type
        if name.endswith("k_proj.bias") and dev.config.positional != "rope":
            # A key bias adds q . b to every score of a query's row, which softmax ignores (no
            # rotation makes it differ from key to key): its gradient is zero but for rounding,
            # ~1e-8 of the largest on either device, so it is only held to be that small.
            for grad in (p.grad, q.grad):
                assert grad.abs().max().item() <= 1e-6 * largest, name
            continue
        assert_rel_close(p.grad, q.grad, 1e-4, f"gradient of {name}")

    # The update from the same gradients: AdamW's first step is lr * g / (|g| + eps), about
    # lr * sign(g), so a gradient that is zero up to rounding could step either way on the two
    # devices; the gradients themselves are compared above.
    for p, q in zip(dev.parameters(), cpu.parameters(), strict=True):
        p.grad.copy_(q.grad)
    settings = dict(lr=1e-3, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.01, fused=True)
    for model in (dev, cpu):  # fused, as the loop's AdamW (training/loop.py fused_adam)
        torch.optim.AdamW(model.parameters(), **settings).step()
    for (name, p), q in zip(dev.named_parameters(), cpu.parameters(), strict=True):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-8, msg=name)


def test_resume_on_the_device_repeats_the_uninterrupted_losses(
    tmp_path, copy_data, device, dry_run
):
    """8 steps in one run against 4, then resumed to 8 (dropout 0.1: the CUDA RNG state must be
    restored too): the per-step losses of metrics.jsonl agree.

    Not bit for bit on CUDA: some backward kernels (embedding, attention) add with atomics in any
    order, so two runs differ by rounding; the losses may differ by a relative 1e-5 (what noise of
    1e-6 on every gradient gives over 8 steps is ~5e-7, measured on the CPU)."""

    def config(steps: int):
        return tiny_config(
            copy_data, max_steps=steps, save_every=4, valid_every=100, device=device.type
        )

    full, cut = tmp_path / "full", tmp_path / "cut"
    said = []
    train(config(8), full, log=said.append)
    train(config(4), cut, log=lambda _: None)
    train(config(8), cut, resume=True, log=said.append)
    where = "cpu" if dry_run else "cuda:0"  # train.device = "cuda" takes the first GPU
    header = [line for line in said if line.startswith("model: ")]
    assert len(header) == 2 and all(f"; device {where}, 1 process(es)" in line for line in header)
    assert any(
        line.startswith(f"resumed from {cut / 'checkpoints' / 'step-000004'} at step 4")
        for line in said
    )
    assert Runs.steps(cut, "train") == Runs.steps(full, "train") == list(range(1, 9))
    ours, uninterrupted = Runs.losses(cut), Runs.losses(full)
    for step, loss in uninterrupted.items():
        assert ours[step] == pytest.approx(loss, rel=1e-5, abs=0), step
    for run in (full, cut):
        for checkpoint in step_dirs(run):
            (rng,) = json.loads((checkpoint / "state.json").read_text())["rng"]  # one process
            assert ("cuda" in rng) == (not dry_run), checkpoint  # the CUDA generator's state too
