"""Training throughput and MFU on a GPU: the paper's base and big models through the project's own
training step, with Hugging Face Marian of the same size beside it, and where the step's time goes.

    PYTHONPATH=src python benchmarks/gpu_train.py --facts --json facts.json     # the facts alone
    PYTHONPATH=src python benchmarks/gpu_train.py --facts --model base big --precision bf16 fp32 \
        --peer base --profile base --json gpu_train.json
    PYTHONPATH=src python benchmarks/gpu_train.py --model base --precision bf16 --compile-model base
    PYTHONPATH=src python benchmarks/gpu_train.py --data data/bible --model base big --json b.json
    PYTHONPATH=src python benchmarks/gpu_train.py --model base --precision bf16 \
        --levers plain fold fold+bf16w fold+graphs --profile base     # each lever, profiled
    PYTHONPATH=src python benchmarks/gpu_train.py --smoke [--data data/bible] [--compile]  # CPU

One step is what training/loop.py does with one batch: collate the batch on the CPU and move it to
the device (Batch.to, pinned memory); the forward pass and label-smoothed loss through the
objective's own `loss` (objectives/seq2seq.py: autocast to --precision, eps from the config, 0.1);
backward of the loss over the batch's target tokens (its scale folded into the loss's
gradient, training/loss.py loss_and_backward, as the loop does: the "fold" lever); clip_grad_norm_ (--clip 1.0; the paper's
configs do not clip, the brief asks for it); AdamW(fused=True).step() with the configs' betas and
eps; increment_version; zero_grad(set_to_none=True); then the step's loss and NLL read back (the
loop logs them), which waits for the GPU. --premade collates and moves every batch once, before
timing, to show the step without the host's batch work. Attention is the fused kernel (what the
trainer picks on a GPU).

Levers (--levers SPEC ...: one cell per spec, in order; a spec is "plain" or lever names joined by
"+", gpu_steps.LEVERS): fold (above; plain is the step before it: the loss's backward scales its
(N, V) gradient in a pass of its own), bf16w (the model's weights in bf16, fp32 masters in AdamW:
no weight casts under autocast, one foreach copy each way a step), compile (torch.compile, as
train.compile), graphs (torch.compile(mode="reduce-overhead"): CUDA graphs, static shapes). --profile
MODEL profiles its first and last spec: before and after. --compile-model MODEL also measures each
spec compiled, after it; --compile measures every spec compiled only. Compiled is the model in torch.compile as the
loop does (train.compile: default arguments, dynamic=None); the time of the first steps, which
compile, is reported apart, and only later steps are timed (with --data the shapes change from
batch to batch: torch recompiles, dynamic from the second shape on; raise --warmup).

Batches. Synthetic (default): B = --batch-tokens // max rows of random ids, each row's source and
target lengths drawn uniformly from --lengths MIN MAX (the target's count includes its <s> / </s>),
padded to the batch's longest; the first row of every batch has the longest lengths, so every batch
has the one shape (B, MAX) and a compiled model compiles once. --lengths N N gives fixed lengths,
no padding. --data DIR: the Bible's sentences (train.spa -> train.eng), a joint BPE (--bpe-vocab,
the Bible recipe's 8000) trained by the project's tokenizer code, batched by token count as the
loop batches (data.batching.batch_indices, collate), shapes varying per batch. Model settings come
from configs/{base,big}.toml through the config loader (37000-token shared vocabulary, as the
paper); with --data the ids come from the smaller BPE but the model keeps its 37000 outputs, so the
FLOPs per token are the synthetic runs'.

Measures. Tokens/s counts real (non-padding) target tokens, </s> included. Timing: --warmup steps,
then --repeats rounds of --steps steps, each round timed from a synchronize to a synchronize; step
ms and tokens/s are the medians over rounds. Achieved TFLOP/s = flops_per_token(model,
L)["training"] (model/accounting.py: 3 x forward matrix products, an encoder over a source as long
as the target) x real target tokens/s, with L = sum(l^2) / sum(l) over the measured target rows
(the length the average token attends over). MFU = that / the bf16 matrix-product rate measured
here (an 8192^3 bf16 matmul, median of 20 after warm-up); fp32 runs are divided by the same bf16
rate. Peak memory: torch.cuda.max_memory_allocated.

--facts: the GPU, torch, CUDA, SM count (alone, without --model: nothing else); bf16, fp32 and tf32
matmul rates; device-to-device copy bandwidth (read + write bytes). --peer MODEL (or --hf: base):
Hugging Face's MarianMTModel of the model's size (sdpa attention, shared embeddings) trained on the
same batches with the same optimizer, clipping and autocast, loss =
F.cross_entropy(label_smoothing=eps) over the same tokens; ours and the peer alternate round by
round and the ratio is the median of per-round ratios. --profile MODEL: a few steps under
torch.profiler (CPU + CUDA): the top ops by self CUDA time, and the step's time split into matmuls,
attention, loss (forward and backward), optimizer (clip, AdamW, zero_grad), norm, dropout,
casts/copies, other elementwise, and idle (step wall time minus the kernels' summed time: host
overhead and syncs); the full table goes to a text file.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the peer is built from a config: nothing to fetch

import torch  # noqa: E402
from gpu_batches import (  # noqa: E402  (benchmarks/gpu_batches.py)
    attended_length,
    bible_batches,
    measured_batches,
    padding,
    synthetic_batches,
)
from gpu_facts import device_facts, matmul_precision, sync  # noqa: E402  (benchmarks/gpu_facts.py)
from gpu_profile import profile_steps  # noqa: E402  (benchmarks/gpu_profile.py)
from gpu_steps import LEVERS, Ours, Peer, parse_levers, run_config  # noqa: E402
from gpu_tables import guarded, print_tables, write_json  # noqa: E402  (gpu_tables.py)

from transformer.model.accounting import count_parameters, flops_per_token  # noqa: E402

# ------------------------------------------------------------------------------------------------
# Timing


def timed_round(side, batches, start: int, steps: int, device) -> tuple[float, int]:
    """(seconds, real target tokens) of `steps` steps from batch `start` on, sync to sync."""
    sync(device)
    began, tokens = time.perf_counter(), 0
    for k in range(steps):
        tokens += side.step(batches[(start + k) % len(batches)])
    sync(device)
    return time.perf_counter() - began, tokens


def warm_up(side, batches, steps: int, device) -> list[float]:
    """Seconds of each warm-up step (the first ones compile under --compile)."""
    times = []
    for k in range(steps):
        seconds, _ = timed_round(side, batches, k, 1, device)
        times.append(round(seconds, 3))
    return times


# ------------------------------------------------------------------------------------------------
# Measuring


def release(device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def rounds_of(side, batches, args, device) -> list[tuple[float, int]]:
    return [
        timed_round(side, batches, args.warmup + r * args.steps, args.steps, device)
        for r in range(args.repeats)
    ]


def summary(rounds, steps: int) -> dict:
    return {
        "step_ms": statistics.median(s / steps for s, _ in rounds) * 1e3,
        "tokens_per_s": statistics.median(n / s for s, n in rounds),
        "rounds": [[round(s, 4), n] for s, n in rounds],
    }


def measure(name: str, precision: str, spec: str, k: int, batches, args, device, results) -> None:
    """One (model, precision, levers) cell, the k-th of its (model, precision); after the first,
    the peer beside it, and after the first and the last the profile (before and after the
    levers), when asked for."""
    run = run_config(name, precision, args.smoke)
    release(device)
    ours = Ours(run, device, args.clip, parse_levers(spec))
    examples = measured_batches(batches, args)  # lists of Example, read before --premade moves them
    length = attended_length(examples)
    cell = dict(
        model=name,
        precision=precision,
        mode=spec,
        parameters=count_parameters(ours.model),
        padding=padding(examples),
        rows=statistics.median(len(b) for b in examples),
        longest=max(len(e.tgt) + 1 for b in examples for e in b),
    )
    if args.premade:
        batches = [ours.prepare(b) for b in batches]
    cell["warmup_step_s"] = warm_up(ours, batches, args.warmup, device)
    cell.update(summary(rounds_of(ours, batches, args, device), args.steps))
    flops = flops_per_token(run.model, length)["training"]
    cell.update(
        attended_length=length, flops_per_token=flops, tflops=flops * cell["tokens_per_s"] / 1e12
    )
    cell["mfu"] = cell["tflops"] / results["facts"]["bf16_tflops"]
    if device.type == "cuda":
        cell["peak_memory_gb"] = torch.cuda.max_memory_allocated(device) / 1e9
    results["cells"].append(cell)
    print(
        f"  {name} {precision} {cell['mode']}: {cell['step_ms']:.1f} ms/step, "
        f"{cell['tokens_per_s']:,.0f} tok/s, {cell['tflops']:.1f} TFLOP/s, MFU {cell['mfu']:.1%}",
        flush=True,
    )
    if k == 0 and name in args.peer:
        with guarded(results, f"peer {name} {precision}"):
            entry = measure_peer(ours, run, batches, args, device, cell)
            results["peer"].append(entry)
            print(
                f"  peer: ours {entry['ours']['tokens_per_s']:,.0f} tok/s, HF "
                f"{entry['hf']['tokens_per_s']:,.0f}, ratio {entry['ratio']:.2f}",
                flush=True,
            )
    last = k == len(specs_of(name, args)) - 1
    if (k == 0 or last) and name in args.profile and precision == args.precision[0]:
        tag = f"{name}-{spec.replace('+', '_')}"
        out = Path(args.profile_out or Path(args.json).with_suffix(f".profile-{tag}.txt"))
        with guarded(results, f"profile {name} {precision}"):
            key = f"{name}-{precision}-{cell['mode']}"
            steps = args.profile_steps
            run = lambda side=ours: timed_round(side, batches, 0, steps, device)[0]  # noqa: E731
            results["profile"][key] = profile_steps(run, steps, device, cell["step_ms"], out)
    del ours
    release(device)


def specs_of(name: str, args) -> list[str]:
    """The lever specs measured for model `name`: --levers, each compiled too (after it) for the
    --compile-model models, or compiled only under --compile."""
    specs = []
    for spec in args.levers:
        parse_levers(spec)  # a misspelt lever fails before any measuring
        compiled = spec if {"compile", "graphs"} & parse_levers(spec) else f"{spec}+compile"
        compiled = compiled.removeprefix("plain+")
        specs += (
            [compiled] if args.compile else [spec, compiled][: 1 + (name in args.compile_model)]
        )
    return list(dict.fromkeys(specs))


def measure_peer(ours, run, batches, args, device, cell) -> dict:
    """Ours and the peer alternating round by round on the same batches."""
    peer = Peer(run, device, args.clip)
    warm_up(peer, batches, args.warmup, device)
    ours_rounds, peer_rounds = [], []
    for r in range(args.repeats):
        start = args.warmup + r * args.steps
        ours_rounds.append(timed_round(ours, batches, start, args.steps, device))
        peer_rounds.append(timed_round(peer, batches, start, args.steps, device))
    ratios = [(n / s) / (m / t) for (s, n), (t, m) in zip(ours_rounds, peer_rounds, strict=True)]
    entry = dict(
        model=cell["model"],
        precision=cell["precision"],
        mode=cell["mode"],
        peer_parameters=count_parameters(peer.model),
        ours=summary(ours_rounds, args.steps),
        hf=summary(peer_rounds, args.steps),
        ratio=statistics.median(ratios),
    )
    del peer
    return entry


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument(
        "--model",
        nargs="*",
        default=None,
        choices=["base", "big"],
        help="models to measure (default: base big; none when --facts is given without it)",
    )
    p.add_argument(
        "--precision",
        nargs="+",
        default=["bf16", "fp32"],
        choices=["bf16", "fp32", "tf32"],
        help="tf32: fp32 training with TF32 matmuls",
    )
    p.add_argument(
        "--facts", action="store_true", help="device facts, fp32/tf32 rates, copy bandwidth"
    )
    p.add_argument(
        "--peak-tflops", type=float, default=0.0, help="MFU's denominator (0: measure it)"
    )
    p.add_argument("--matmul-size", type=int, default=8192)
    p.add_argument("--matmul-repeats", type=int, default=20)
    p.add_argument("--copy-mb", type=int, default=1024)
    p.add_argument(
        "--batch-tokens", type=int, default=25000, help="padded tokens per batch and side"
    )
    p.add_argument("--lengths", nargs=2, type=int, default=[20, 60], metavar=("MIN", "MAX"))
    p.add_argument(
        "--data", default=None, help="directory with train.spa / train.eng (real lengths)"
    )
    p.add_argument("--pairs", type=int, default=0, help="--data: pairs to use (0: all)")
    p.add_argument("--bpe-vocab", type=int, default=8000)
    p.add_argument("--max-len", type=int, default=128, help="--data: longest pair kept (tokens)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=5, help="steps per timed round")
    p.add_argument("--repeats", type=int, default=5, help="timed rounds")
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument(
        "--levers",
        nargs="+",
        default=["fold"],
        help=f"one cell per spec and model, in order: plain (the step before the levers) or "
        f"levers joined by + from {', '.join(LEVERS)} (default: fold, the loop's step)",
    )
    p.add_argument(
        "--compile", action="store_true", help="every spec compiled (+compile), no eager cell"
    )
    p.add_argument(
        "--compile-model",
        nargs="+",
        default=[],
        choices=["base", "big"],
        help="these models measured compiled too, after their eager cells",
    )
    p.add_argument(
        "--premade", action="store_true", help="batches collated and moved before timing"
    )
    p.add_argument(
        "--peer",
        "--hf",
        nargs="*",
        default=None,
        choices=["base", "big"],
        help="models to train Hugging Face Marian beside (the flag alone: base)",
    )
    p.add_argument(
        "--profile",
        nargs="*",
        default=[],
        choices=["base", "big"],
        help="models to profile (at the first --precision)",
    )
    p.add_argument("--profile-steps", type=int, default=3)
    p.add_argument(
        "--profile-out", default=None, help="profile table file (default: beside --json)"
    )
    p.add_argument("--threads", type=int, default=0, help="CPU threads for torch (0: its default)")
    p.add_argument("--json", default="gpu_train.json")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="tiny models, batches and matmuls, with facts, peer and profile: seconds on a CPU",
    )
    args = p.parse_args()
    if args.model is None:
        args.model = [] if args.facts else ["base", "big"]
    args.peer = ["base"] if args.peer == [] else (args.peer or [])
    if args.smoke:
        args.threads = args.threads or 1  # a shared CPU: no oversubscription
        args.facts = True
        args.peer, args.profile = args.peer or ["base"], args.profile or ["base"]
        args.matmul_size, args.matmul_repeats, args.copy_mb = 256, 3, 8
        args.batch_tokens, args.lengths = 512, [8, 16]
        args.warmup, args.steps, args.repeats, args.profile_steps = 1, 2, 2, 2
        args.pairs, args.bpe_vocab = args.pairs or 1500, 600
    if args.lengths[0] < 2 or args.lengths[0] > args.lengths[1]:
        p.error(f"--lengths {args.lengths[0]} {args.lengths[1]}: give MIN <= MAX, MIN >= 2")
    return args


def main() -> int:
    args = parse_args()
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    started = time.perf_counter()
    results = {
        "args": vars(args),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "cells": [],
        "peer": [],
        "profile": {},
        "errors": [],
    }
    print(
        f"device {device}; measuring the bf16 matmul{' and the facts' if args.facts else ''}",
        flush=True,
    )
    results["facts"] = device_facts(device, args, full=args.facts)
    lo, hi = args.lengths
    if args.data:
        batches, results["data"] = bible_batches(
            Path(args.data), args.pairs or 10**9, args.bpe_vocab, args.batch_tokens, args.max_len
        )
        print(f"data: {results['data']}", flush=True)
        need = args.warmup + args.repeats * args.steps
        if len(batches) < need:
            print(f"  note: {len(batches)} batches for {need} steps: later rounds repeat batches")
    else:
        vocab = run_config("base", "fp32", args.smoke).model.vocab_size
        batches = synthetic_batches(max(args.steps, 2), args.batch_tokens // hi, lo, hi, vocab, 1)
    for name in args.model:
        for precision in args.precision:
            for k, spec in enumerate(specs_of(name, args)):
                with matmul_precision("high" if precision == "tf32" else "highest"):
                    with guarded(results, f"{name} {precision} {spec}"):
                        measure(name, precision, spec, k, batches, args, device, results)
                write_json(results, args.json, started)
    write_json(results, args.json, started)
    print_tables(results)
    print(f"\n{time.perf_counter() - started:.0f} s in all; results: {args.json}")
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
