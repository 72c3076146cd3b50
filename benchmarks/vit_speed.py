"""ViT training throughput: images/s, and as a share of this machine's measured matrix-product ceiling.

    python benchmarks/vit_speed.py [--config configs/fashion-mnist-vit.toml] [--set KEY=VALUE ...] [--repeats 5]

One training step as the trainer takes it (pre-norm encoder over [CLS] + patches, classifier on
[CLS], cross entropy, backward, gradient clipping, AdamW) on random 28 x 28 images, in the
precision the config resolves to (precision = "auto": the project's measurement), with each
attention path: torch's fused kernel and the textbook softmax(QK^T/sqrt(d))V. The two alternate
in rounds of --steps steps; images/s is the median over rounds, the speed-up the median of the
per-round ratios.

The ceiling: the best rate of one large square product (--ceiling-size, 2048: 17 GFLOP) in the
same precision, and the rate of the products at the model's own shapes (a batch of tokens times
d_model x d_ff), which small models cannot beat however little else costs. A step's work is
counted as transformer.model.accounting.flops_per_image does (the matrix products: patch
projection, attention, feed-forward, classifier; 3x the forward for training).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import torch
import torch.nn.functional as F

from transformer.config import load_config
from transformer.model.accounting import flops_per_image
from transformer.model.attention import MultiHeadAttention
from transformer.model.build import build_model
from transformer.runtime.measure_cache import cpu_name
from transformer.runtime.precision import resolve_precision


def product_rate(m: int, k: int, n: int, bf16: bool, seconds: float = 1.0) -> float:
    """GFLOP/s of (m, k) @ (k, n), the best of repeated runs for about `seconds`."""
    a, b = torch.randn(m, k), torch.randn(k, n)
    if bf16:
        a, b = a.bfloat16(), b.bfloat16()
    a @ b  # warm-up: oneDNN picks its kernel
    best, began = float("inf"), time.perf_counter()
    while time.perf_counter() - began < seconds:
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * m * k * n / best / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/fashion-mnist-vit.toml")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--steps", type=int, default=10, help="steps per path per round")
    parser.add_argument("--repeats", type=int, default=5, help="rounds")
    parser.add_argument("--ceiling-size", type=int, default=2048)
    args = parser.parse_args()

    config = load_config(args.config, args.set)
    m, v, t = config.model, config.model.vision, config.train
    precision = resolve_precision(t.precision, "cpu", m.d_model, m.d_ff, config.data.vocab_size).precision  # as the trainer
    bf16 = precision == "bf16"
    torch.manual_seed(0)
    model = build_model(m.replace(vocab_size=1, pad_id=0, bos_id=0, eos_id=0, n_classes=10)).train()
    batch = max(1, t.batch_tokens // (v.n_patches + 1))
    images, labels = torch.randn(batch, v.channels, v.image_size, v.image_size), torch.randint(0, 10, (batch,))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=t.weight_decay)
    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if bf16 else contextlib.nullcontext
    attention = [module for module in model.modules() if isinstance(module, MultiHeadAttention)]

    def steps(impl: str, n: int) -> float:
        for module in attention:
            module.impl = impl
        start = time.perf_counter()
        for _ in range(n):
            with autocast():
                logits = model.pooler(model(images))
            F.cross_entropy(logits.float(), labels).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return n * batch / (time.perf_counter() - start)

    paths = ("fused", "textbook")
    for impl in paths:
        steps(impl, 3)  # warm-up
    rates = {impl: [] for impl in paths}
    for _ in range(args.repeats):
        for impl in paths:
            rates[impl].append(steps(impl, args.steps))

    tokens = v.n_patches + 1
    per_image = flops_per_image(model.config)["training"]
    size = args.ceiling_size
    square = product_rate(size, size, size, bf16)
    shaped = product_rate(batch * tokens, m.d_model, m.d_ff, bf16)
    params = sum(p.numel() for p in model.parameters())
    print(f"CPU: {cpu_name()}, {torch.get_num_threads()} threads; torch {torch.__version__}; precision {precision}")
    print(f"model: {params / 1e6:.2f}M parameters, d_model {m.d_model}, {m.n_encoder_layers} layers, {m.n_heads} heads, "
          f"d_ff {m.d_ff}; {v.n_patches} patches of {v.patch_size}x{v.patch_size} + [CLS]; {batch} images a step; "
          f"{per_image / 1e6:.1f} MFLOP per image trained")
    print(f"ceiling: {square:.0f} GFLOP/s ({size}^3 product), {shaped:.0f} GFLOP/s "
          f"({batch * tokens} x {m.d_model} x {m.d_ff}, the model's feed-forward shape)")
    print("| attention | images/s | GFLOP/s | share of the square ceiling | of the model-shape ceiling |")
    print("|---|---:|---:|---:|---:|")
    for impl in paths:
        rate = statistics.median(rates[impl])
        achieved = rate * per_image / 1e9
        print(f"| {impl} | {rate:,.0f} | {achieved:.1f} | {achieved / square:.1%} | {achieved / shaped:.1%} |")
    ratio = statistics.median(b / a for a, b in zip(rates["fused"], rates["textbook"], strict=True))
    print(f"textbook / fused: {ratio:.2f}x (median of {args.repeats} rounds of {args.steps} steps)")


if __name__ == "__main__":
    main()
