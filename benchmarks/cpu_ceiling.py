"""How close CPU training runs to the machine's fp32 matrix-product ceiling at the recipe's shapes.

The ceiling: every matrix product of one training step of the config's model (each linear layer
forward, and its two backward products: the input's gradient and the weight's), timed alone with
torch.mm in fp32 on random data at the step's row count, summed: the step's product FLOPs over
that time. The achieved rate: the model's training FLOPs per target token
(model/accounting.py, 3 x the forward products and attention) x the target tokens/s of real
training steps of the config (fp32, steps --skip+1 .. --steps of a run, from its metrics.jsonl).
Their ratio is the share of the ceiling that training reaches; the rest is everything that is not
a product (attention's softmax, norms, the loss, dropout, the optimizer, copies).

    PYTHONPATH=src python benchmarks/cpu_ceiling.py [--config configs/bible-es-en.toml]
        [--steps 40] [--skip 10] [--profile]

Under AVX2 (the typical CPU) on a machine that has more, hold torch to it:
    ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 PYTHONPATH=src ...
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import torch

from transformer.config import load_config
from transformer.model.accounting import flops_per_token
from transformer.runtime.measure_cache import cpu_name

ROOT = Path(__file__).resolve().parents[1]


def step_products(cfg, rows: int, vocab: int) -> Counter:
    """(m, k, n) -> count: the matrix products of one training step (forward and backward) of an
    encoder-decoder with `rows` source and `rows` target positions."""
    d, ff = cfg.d_model, cfg.d_ff
    forward = Counter()
    for _ in range(cfg.n_encoder_layers):
        forward[(rows, d, d)] += 4  # q, k, v, out
        forward[(rows, d, ff)] += 1
        forward[(rows, ff, d)] += 1
    for _ in range(cfg.n_decoder_layers):
        forward[(rows, d, d)] += 4 + 4  # self-attention; cross: q, out on targets, k, v on sources
        forward[(rows, d, ff)] += 1
        forward[(rows, ff, d)] += 1
    forward[(rows, d, vocab)] += 1  # the output projection
    step = Counter()
    for (m, k, n), count in forward.items():
        step[(m, k, n)] += count  # y = x W
        step[(m, n, k)] += count  # dx = dy W^T
        step[(k, m, n)] += count  # dW = x^T dy
    return step


def time_mm(m: int, k: int, n: int, seconds: float = 0.3) -> float:
    """Median seconds of torch.mm (m, k) @ (k, n) in fp32 on random data."""
    a, b = torch.randn(m, k), torch.randn(k, n)
    torch.mm(a, b)
    times = []
    began = time.perf_counter()
    while len(times) < 5 or time.perf_counter() - began < seconds:
        t0 = time.perf_counter()
        torch.mm(a, b)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def trained_tokens_per_s(config: Path, steps: int, skip: int, out: Path) -> float:
    """Target tokens/s of steps skip+1 .. steps of a fresh fp32 run of the config."""
    sets = [
        f"train.max_steps={steps}",
        "train.valid_every=100000",
        "train.save_every=100000",
        'train.precision="fp32"',
        "train.max_minutes=1000.0",
        "train.log_every=10",
    ]
    argv = [sys.executable, "-m", "transformer.cli", "train", str(config), "--out", str(out)]
    for s in sets:
        argv += ["--set", s]
    subprocess.run(argv, cwd=ROOT, check=True, capture_output=True)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = {r["step"]: r for r in records if r["split"] == "train"}
    tokens = sum(train[s]["tokens"] for s in range(skip + 1, steps + 1))
    return tokens / (train[steps]["elapsed_s"] - train[skip]["elapsed_s"])


def ceiling(products: Counter, show: bool = False) -> tuple[float, float]:
    """(FLOPs, seconds) of one step's products, each timed alone."""
    flops = seconds = 0.0
    for (m, k, n), count in sorted(products.items()):
        t = time_mm(m, k, n)
        flops += 2 * m * k * n * count
        seconds += t * count
        if show:
            print(
                f"  mm {m:>5} x {k:>5} x {n:>5}  x{count:<3} {2 * m * k * n / t / 1e9:7.1f} GFLOP/s"
            )
    return flops, seconds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", type=Path, default=ROOT / "configs" / "bible-es-en.toml")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--skip", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3, help="ceiling, then training, this many times")
    p.add_argument("--length", type=int, default=32, help="typical positions per row (attention)")
    args = p.parse_args()
    run = load_config(args.config)
    cfg, rows, vocab = run.model, run.train.batch_tokens, run.data.vocab_size
    products = step_products(cfg, rows, vocab)
    per_token = flops_per_token(cfg.replace(vocab_size=vocab), args.length)["training"]
    rounds = []
    for r in range(args.rounds):  # alternating: a VM's speed drifts by 10-20% within minutes
        flops, seconds = ceiling(products, show=r == 0)
        with tempfile.TemporaryDirectory() as tmp:
            tps = trained_tokens_per_s(args.config, args.steps, args.skip, Path(tmp) / "run")
        rounds.append((flops / seconds, tps, per_token * tps / (flops / seconds)))
        print(
            f"round {r + 1}: ceiling {flops / seconds / 1e9:.1f} GFLOP/s, training {tps:,.0f} "
            f"target tok/s = {per_token * tps / 1e9:.1f} GFLOP/s: {rounds[-1][2]:.0%}"
        )
    print(
        f"\n# {cpu_name()}; torch {torch.__version__}, CPU capability "
        f"{torch.backends.cpu.get_cpu_capability()}, {torch.get_num_threads()} threads"
    )
    ceil, tps, share = (statistics.median(r[i] for r in rounds) for i in range(3))
    print(
        f"product ceiling at the step's shapes: {ceil / 1e9:.1f} GFLOP/s (median of {len(rounds)})"
    )
    print(
        f"training: {tps:,.0f} target tok/s x {per_token / 1e6:.1f} MFLOP/token; "
        f"share of the ceiling, median of the rounds: {share:.0%}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
