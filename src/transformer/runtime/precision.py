"""precision = "auto": train in bf16 only where bf16 is measured to be faster than fp32; and
model.attention_impl = "auto": train with the attention path measured faster (end of the file).

Rules:
- Why a measurement: whether bf16 autocast pays on a CPU cannot be read off its flags. CPUs with
  native bf16 (AVX512-BF16, AMX) run bf16 matrix products several times faster than fp32, a VM may
  run them slower than fp32 although it reports avx512_bf16, and AVX2-only CPUs emulate bf16, far
  slower (figures per CPU: benchmarks/precision.py, docs/benchmarks/training.md).
- What is measured (measure_bf16_speedup): the feed-forward and output projection at the
  model's shapes, x (T, C) @ W1 (C, d_ff) -> relu -> @ W2 (d_ff, C) -> @ Wout (C, V), forward
  and backward with fp32 master weights, under torch.autocast("cpu", bfloat16) against plain
  fp32: what training does on a CPU. Speedup = fp32 time / bf16 time (> 1: bf16 faster).
  One warm-up each, then interleaved fp32/bf16 runs, the fastest of each (on a noisy VM
  other work only ever slows a run down, so the minimum is the least disturbed). To stay
  well under a second: V is clipped to 2048 and T to 1024, and T is lowered further (to no less
  than 128) for models whose run would exceed ~12 GFLOP; fewer tokens per weight cast only
  makes bf16 look slower, never faster. Timed runs stop once 0.5 s have passed (one pair at
  least); when the warm-up alone spends that and bf16 took over twice fp32's time there
  (emulated bf16), the warm-up decides.
- Threshold: bf16 iff speedup >= min_speedup (MIN_SPEEDUP = 1.5). The products are only part of a
  training step (attention, norms, the optimizer and the casts themselves are not faster in bf16),
  so a step gains much less than they do (benchmarks/precision.py measures both on real training;
  the figures per CPU are in docs/benchmarks/training.md). Below ~1.5x the step would gain little
  or lose, and bf16 also costs accuracy, so there fp32 is chosen.
- Not measured: an explicit precision ("fp32", "bf16", "fp16") is used as set; a CUDA device
  gets bf16 when torch.cuda.is_bf16_supported(), else fp32; other devices (mps...) get fp32.
- The cache (key and file): transformer.runtime.measure_cache.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..config import ATTENTION_IMPLS, INFERENCE_PRECISIONS, PRECISIONS  # the settings' choice lists
from .measure_cache import (
    cache_key,
    cached_or_measured,
    machine_key,
    usable,
)

MIN_SPEEDUP = 1.5  # products this much faster in bf16 before a training step is (see the rules)
MAX_TOKENS = 1024
MAX_VOCAB = 2048
MIN_TOKENS = 128
MAX_FLOPS_PER_RUN = 12e9  # ~40 ms of fp32 at 300 GFLOP/s


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision to train in, and why."""

    precision: str
    """"fp32", "bf16" or "fp16"; never "auto"."""
    reason: str
    """Short human text: "set in the config", "bf16 measured 0.60x fp32 on this CPU", ..."""
    speedup: float | None = None
    """Measured bf16 speed / fp32 speed; None when not measured."""

    def describe(self) -> str:
        """E.g. "fp32 (bf16 measured 0.60x fp32 on this CPU)"."""
        return f"{self.precision} ({self.reason})"


def resolve_precision(
    requested: str,
    device: torch.device | str,
    d_model: int,
    d_ff: int,
    vocab_size: int,
    *,
    tokens: int = 1024,
    cache_file: str | os.PathLike | None = None,
    measure: Callable[..., float] | None = None,
    min_speedup: float | None = None,
) -> PrecisionChoice:
    """Turn a configured precision ("auto" included) into the one to train in (rules above)."""
    if requested not in PRECISIONS:
        raise ValueError(f"unknown precision {requested!r}: use one of {', '.join(PRECISIONS)}")
    if requested != "auto":
        return PrecisionChoice(requested, "set in the config")
    kind = torch.device(device).type
    if kind == "cuda":
        if torch.cuda.is_bf16_supported():
            return PrecisionChoice("bf16", "CUDA GPU supports bf16")
        return PrecisionChoice("fp32", "CUDA GPU does not support bf16")
    if kind != "cpu":
        return PrecisionChoice(
            "fp32", f"bf16 speed is only measured on CPUs; fp32 is the safe choice on {kind}"
        )

    min_speedup = MIN_SPEEDUP if min_speedup is None else min_speedup
    measure = measure_bf16_speedup if measure is None else measure
    try:
        speedup, prefix = cached_or_measured(
            cache_key(d_model, d_ff, vocab_size, tokens),
            cache_file,
            lambda: measure(d_model, d_ff, vocab_size, tokens),
        )
    except RuntimeError as err:
        return PrecisionChoice("fp32", f"bf16 does not run on this CPU ({err})")
    if not usable(speedup):
        return PrecisionChoice("fp32", f"the bf16 measurement gave no usable speedup ({speedup})")
    return _judge(speedup, min_speedup, prefix)


def inference_precision(
    requested: str, device: torch.device | str, d_model: int, d_ff: int, vocab_size: int
) -> PrecisionChoice:
    """The precision to decode in: fp32, bf16 or int8 as asked, or for "auto" bf16 where the
    measurement above finds it faster (int8 is never chosen for the user: it changes outputs more
    than bf16)."""
    if requested not in (*INFERENCE_PRECISIONS, "auto"):
        raise ValueError(
            f"unknown precision {requested!r}: use one of {', '.join(INFERENCE_PRECISIONS)}, auto"
        )
    if requested != "auto":
        return PrecisionChoice(requested, "as asked")
    return resolve_precision("auto", device, d_model, d_ff, vocab_size)


def _judge(speedup: float, min_speedup: float, prefix: str) -> PrecisionChoice:
    precision = "bf16" if speedup >= min_speedup else "fp32"
    return PrecisionChoice(
        precision, f"{prefix}bf16 measured {speedup:.2f}x fp32 on this CPU", speedup
    )


def measure_bf16_speedup(
    d_model: int,
    d_ff: int,
    vocab_size: int,
    tokens: int = 1024,
    repeats: int = 5,
    budget_s: float = 0.5,
) -> float:
    """fp32 time / bf16-autocast time of a feed-forward + output projection, forward and backward.

    Shapes (clipped as the module docstring says): x (T, C), W1 (C, d_ff), W2 (d_ff, C),
    Wout (C, V). Uses its own seeded generator (the global RNG is untouched) and torch's
    current thread count. Raises RuntimeError where bf16 autocast cannot run.
    """
    vocab = min(vocab_size, MAX_VOCAB)
    flops_per_token = 6 * (2 * d_model * d_ff + d_model * vocab)  # forward 2, backward 4 per MAC
    fit = int(MAX_FLOPS_PER_RUN // flops_per_token) // 64 * 64
    n = min(tokens, MAX_TOKENS, max(MIN_TOKENS, fit))
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, d_model, generator=gen)  # (T, C)
    w1 = (torch.randn(d_model, d_ff, generator=gen) / math.sqrt(d_model)).requires_grad_()
    w2 = (torch.randn(d_ff, d_model, generator=gen) / math.sqrt(d_ff)).requires_grad_()
    w_out = (torch.randn(d_model, vocab, generator=gen) / math.sqrt(d_model)).requires_grad_()

    def run(bf16: bool) -> float:
        start = time.perf_counter()
        ctx = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
        with ctx:
            logits = torch.relu(x @ w1) @ w2 @ w_out  # (T, V)
        logits.float().sum().backward()
        for w in (w1, w2, w_out):
            w.grad = None
        return time.perf_counter() - start

    began = time.perf_counter()
    warm_fp32, warm_bf16 = run(False), run(True)  # warm-up: oneDNN builds its kernels
    if time.perf_counter() - began > budget_s and warm_bf16 > 2 * warm_fp32:
        return warm_fp32 / warm_bf16  # bf16 emulated: slow enough that one look decides
    fp32, bf16 = [], []
    while len(fp32) < max(1, repeats):
        fp32.append(run(False))
        bf16.append(run(True))
        if time.perf_counter() - began > budget_s:
            break
    return min(fp32) / min(bf16)  # the least disturbed run of each: noise only ever slows


# ------------------------------------------------------------------------------------------------
# attention_impl = "auto": which attention path trains faster at the run's shapes.
#
# torch's fused CPU kernel (flash attention) is the fast forward everywhere and the fast backward
# in fp32, but its bf16 backward carries a fixed cost that short sequences cannot hide, so at short
# lengths the written-out softmax(QK^T/sqrt(d))V trains faster and at long ones the fused kernel
# does (benchmarks/attention_auto.py and benchmarks/vit_speed.py; the timings per shape are in
# docs/benchmarks/training.md). The crossover depends on the CPU, the dtype and the shapes, so it is
# measured: forward and backward of both paths at the run's (rows, heads, length, head dim) and
# dtype, with a padding mask, interleaved after a warm-up, the fastest of each (as above). The
# textbook path is chosen iff it is at least MIN_ATTENTION_SPEEDUP times faster (it holds the (T,
# S) weights in memory, the fused kernel does not). Only training resolves "auto"; inference uses
# the fused kernel, whose forward is never slower here. CUDA devices always get the fused kernel.
# Cached in the same file as the precision measurement, under its own key.

MIN_ATTENTION_SPEEDUP = 1.2
MAX_ATTENTION_ELEMENTS = 2**24  # rows * heads * length^2 of one probe (~64 MB of fp32 scores)


@dataclass(frozen=True)
class AttentionChoice:
    """The attention path to train with, and why."""

    impl: str
    """"fused" or "textbook"; never "auto"."""
    reason: str
    speedup: float | None = None
    """Fused time / textbook time, forward and backward; None when not measured."""

    def describe(self) -> str:
        return f"{self.impl} ({self.reason})"


def resolve_attention(
    requested: str,
    device: torch.device | str,
    precision: str,
    n_heads: int,
    head_dim: int,
    length: int,
    rows: int,
    *,
    cache_file: str | os.PathLike | None = None,
    measure: Callable[..., float] | None = None,
    min_speedup: float = MIN_ATTENTION_SPEEDUP,
) -> AttentionChoice:
    """Turn model.attention_impl ("auto" included) into the path a training run uses (rules
    above)."""
    if requested not in ATTENTION_IMPLS:
        raise ValueError(
            f"unknown attention_impl {requested!r}: use one of {', '.join(ATTENTION_IMPLS)}"
        )
    if requested != "auto":
        return AttentionChoice(requested, "set in the config")
    kind = torch.device(device).type
    if kind != "cpu":
        return AttentionChoice("fused", f"the fused kernel on {kind}")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    rows = max(1, min(rows, MAX_ATTENTION_ELEMENTS // max(1, n_heads * length * length)))
    key = (
        f"{machine_key()} | attention "
        f"{str(dtype).removeprefix('torch.')} rows={rows} heads={n_heads} length={length} "
        f"head_dim={head_dim}"
    )
    measure = measure_attention_speedup if measure is None else measure
    try:
        speedup, prefix = cached_or_measured(
            key, cache_file, lambda: measure(rows, n_heads, length, head_dim, dtype)
        )
    except RuntimeError as err:
        return AttentionChoice("fused", f"the comparison did not run ({err})")
    if not usable(speedup):
        return AttentionChoice("fused", f"the comparison gave no usable speedup ({speedup})")
    impl = "textbook" if speedup >= min_speedup else "fused"
    return AttentionChoice(
        impl,
        f"{prefix}textbook measured {speedup:.2f}x fused's training speed at "
        f"{length} positions on this CPU",
        speedup,
    )


def measure_attention_speedup(
    rows: int,
    n_heads: int,
    length: int,
    head_dim: int,
    dtype: torch.dtype,
    repeats: int = 5,
    budget_s: float = 0.5,
) -> float:
    """Fused time / textbook time of attention forward and backward on (rows, heads, length,
    head_dim) in `dtype`, with a padding mask hiding the last quarter of the keys of half the
    rows."""
    from ..model.attention import fused_attention, scaled_dot_product_attention

    gen = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(rows, n_heads, length, head_dim, generator=gen).to(dtype).requires_grad_()
        for _ in range(3)
    )
    mask = torch.ones(rows, 1, 1, length, dtype=torch.bool)
    mask[: rows // 2, ..., length - length // 4 :] = False

    def run(fused: bool) -> float:
        start = time.perf_counter()
        out = (
            fused_attention(q, k, v, mask)
            if fused
            else scaled_dot_product_attention(q, k, v, mask)[0]
        )
        out.float().sum().backward()
        for x in (q, k, v):
            x.grad = None
        return time.perf_counter() - start

    began = time.perf_counter()
    run(True), run(False)  # warm-up
    fused, textbook = [], []
    while len(fused) < max(1, repeats):
        fused.append(run(True))
        textbook.append(run(False))
        if time.perf_counter() - began > budget_s:
            break
    return min(fused) / min(textbook)
