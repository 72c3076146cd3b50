"""The fused label-smoothed cross entropy against autograd through log_softmax, side by side in one process.

    python benchmarks/loss_speed.py --data data/bible --pairs 6000 --repeats 7

Two measurements, each alternating the two losses in rounds and reporting the median ratio:
1. the loss alone, forward + backward, on logits of the Bible recipe's batch shape (3,072
   target positions, vocabulary 8,000) in bf16 (the logits autocast gives) and fp32;
2. whole training steps of the recipe's model (d_model 256, 3+3 layers, 4 heads, RoPE,
   pre-norm, d_ff 1,024, dropout 0.1; Adam, clipping) on the same Bible batches, bf16
   autocast, where only the loss differs.
The peer is what transformer.training.loss computed before it was fused: log_softmax of the
float32 logits, the target's log-probability gathered, the smoothing term from the row sums,
autograd for the backward pass (the same arithmetic as the textbook -sum q log p).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from train_speed import BOS, EOS, PAD, bible_examples, sample_arguments  # benchmarks/train_speed.py

import transformer
from transformer.config import ModelConfig
from transformer.data.batching import batch_indices, collate
from transformer.runtime.measure_cache import cpu_name
from transformer.training.loss import LossSums, label_smoothed_cross_entropy


def autograd_loss(logits: torch.Tensor, target: torch.Tensor, epsilon: float, pad_id: int) -> LossSums:
    """The peer: label smoothing through log_softmax and autograd (the loss before it was fused)."""
    vocab = logits.size(-1)
    logp = F.log_softmax(logits.reshape(-1, vocab).float(), dim=-1)  # (N, V)
    target = target.reshape(-1)
    keep = target != pad_id
    nll = -logp.gather(1, target[:, None]).squeeze(1)  # (N,)
    others = -(logp.sum(dim=1) - logp[:, pad_id]) - nll  # sum over the V - 2 classes off the target and padding
    smooth = (1.0 - epsilon) * nll + epsilon / (vocab - 2) * others
    zero = torch.zeros((), dtype=smooth.dtype)
    return LossSums(torch.where(keep, smooth, zero).sum(), torch.where(keep, nll, zero).sum(), int(keep.sum()))


def alternate(name: str, runs: dict, repeats: int, unit: str) -> None:
    """Time each entry of runs (name -> callable returning the work done) in alternating rounds; print medians."""
    for run in runs.values():
        run()  # warm-up
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(repeats):
        for k, run in runs.items():
            t0 = time.perf_counter()
            run()
            times[k].append(time.perf_counter() - t0)
    (a, ta), (b, tb) = times.items()
    ratio = statistics.median(y / x for x, y in zip(ta, tb, strict=True))
    print(f"{name}: {a} {statistics.median(ta) * 1e3:,.1f} {unit}, {b} {statistics.median(tb) * 1e3:,.1f} {unit}; "
          f"{a} {ratio:.2f}x faster (median of the rounds' ratios)", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sample_arguments(parser, batch_tokens=3072, steps=6, repeats=7)
    args = parser.parse_args()
    print(f"{cpu_name()}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    losses = {"fused": label_smoothed_cross_entropy, "autograd": autograd_loss}

    torch.manual_seed(0)
    n, vocab = args.batch_tokens, 8000
    target = torch.randint(4, vocab, (n,))
    target[-n // 20:] = PAD  # 5% padding, as the recipe's length-sorted batches have
    for dtype in (torch.bfloat16, torch.float32):
        logits = (torch.randn(n, vocab) * 3).to(dtype).requires_grad_()

        def loss_step(fn, logits=logits):
            fn(logits, target, 0.1, PAD).loss.backward()
            logits.grad = None

        alternate(f"loss alone ({n:,} x {vocab:,}, {str(dtype).removeprefix('torch.')})",
                  {k: (lambda fn=fn: loss_step(fn)) for k, fn in losses.items()}, args.repeats, "ms")

    tok, examples = bible_examples(Path(args.data), args.pairs, vocab)
    batches = [collate([examples[i] for i in b], PAD, BOS, EOS)
               for b in batch_indices([e.size for e in examples], args.batch_tokens, seed=1, epoch=0)]
    cfg = ModelConfig(vocab_size=tok.vocab_size, d_model=256, n_heads=4, n_encoder_layers=3, n_decoder_layers=3,
                      d_ff=1024, dropout=0.1, max_positions=256, positional="rope", norm_position="pre")
    models = {k: transformer.build_model(cfg).train() for k in losses}
    models["autograd"].load_state_dict(models["fused"].state_dict())
    optimizers = {k: torch.optim.Adam(m.parameters(), lr=5e-4, betas=(0.9, 0.98), eps=1e-9) for k, m in models.items()}
    position = dict.fromkeys(losses, 0)

    def train_steps(k: str) -> None:
        model, optimizer = models[k], optimizers[k]
        for _ in range(args.steps):
            b = batches[position[k] % len(batches)]
            position[k] += 1
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = model(b.src, b.tgt_in, src_mask=b.src_mask)
            sums = losses[k](logits, b.tgt_out, 0.1, PAD)
            optimizer.zero_grad(set_to_none=True)
            (sums.loss / sums.n_tokens).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()

    alternate(f"{args.steps} training steps (bf16 autocast, {len(batches)} batches of {args.batch_tokens:,} tokens)",
              {k: (lambda k=k: train_steps(k)) for k in losses}, args.repeats, "ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
