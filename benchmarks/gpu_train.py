"""Training throughput and MFU on a GPU: the paper's base and big models through the project's own
training step, with Hugging Face Marian of the same size beside it, and where the step's time goes.

    PYTHONPATH=src python benchmarks/gpu_train.py --facts --json facts.json     # the facts alone
    PYTHONPATH=src python benchmarks/gpu_train.py --facts --model base big --precision bf16 fp32 \
        --peer base --profile base --json gpu_train.json
    PYTHONPATH=src python benchmarks/gpu_train.py --model base --precision bf16 --compile-model base
    PYTHONPATH=src python benchmarks/gpu_train.py --data data/bible --model base big --json b.json
    PYTHONPATH=src python benchmarks/gpu_train.py --smoke [--data data/bible] [--compile]  # CPU

One step is what training/loop.py does with one batch: collate the batch on the CPU and move it to
the device (Batch.to, pinned memory); the forward pass and label-smoothed loss through the
objective's own `loss` (objectives/seq2seq.py: autocast to --precision, eps from the config, 0.1);
backward of the loss over the batch's target tokens; clip_grad_norm_ (--clip 1.0; the paper's
configs do not clip, the brief asks for it); AdamW(fused=True).step() with the configs' betas and
eps; increment_version; zero_grad(set_to_none=True); then the step's loss and NLL read back (the
loop logs them), which waits for the GPU. --premade collates and moves every batch once, before
timing, to show the step without the host's batch work. Attention is the fused kernel (what the
trainer picks on a GPU). --compile-model MODEL also measures MODEL compiled, after its eager cell;
--compile measures every model compiled only. Compiled is the model wrapped in torch.compile as the
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
import contextlib
import dataclasses
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the peer is built from a config: nothing to fetch

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from gpu_facts import device_facts, matmul_precision, sync  # noqa: E402  (benchmarks/gpu_facts.py)
from gpu_profile import OPTIMIZER, profile_steps  # noqa: E402  (benchmarks/gpu_profile.py)
from torch.autograd.graph import increment_version  # noqa: E402
from torch.profiler import record_function  # noqa: E402

from transformer.config import load_config  # noqa: E402
from transformer.data.batching import Example, batch_indices, collate, encode_examples  # noqa: E402
from transformer.data.tokenizer import train_bpe  # noqa: E402
from transformer.model.accounting import count_parameters, flops_per_token  # noqa: E402
from transformer.model.attention import MultiHeadAttention  # noqa: E402
from transformer.model.build import build_model  # noqa: E402
from transformer.training.objectives import base as objective_base  # noqa: E402
from transformer.training.objectives import seq2seq  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIRST_ID = 4  # ids 0-3 are <pad> <unk> <s> </s>: random tokens start above them
SMOKE = dict(d_model=64, n_heads=4, d_ff=128, n_encoder_layers=2, n_decoder_layers=2)


# ------------------------------------------------------------------------------------------------
# Batches


def synthetic_batches(k: int, rows: int, lo: int, hi: int, vocab: int, seed: int):
    """k batches of `rows` random examples; lengths in [lo, hi] (targets counting <s>/</s>), the
    first row of each batch the longest, so that every batch pads to (rows, hi)."""
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(k):
        src_len = torch.randint(lo, hi + 1, (rows,), generator=g)
        tgt_len = torch.randint(lo - 1, hi, (rows,), generator=g)  # + <s> or </s>: lo..hi
        src_len[0], tgt_len[0] = hi, hi - 1
        ids = torch.randint(FIRST_ID, vocab, (rows, 2 * hi), generator=g)
        batches.append(
            [
                Example(ids[i, : src_len[i]].tolist(), ids[i, hi : hi + tgt_len[i]].tolist())
                for i in range(rows)
            ]
        )
    return batches


def bible_batches(data: Path, pairs: int, bpe_vocab: int, batch_tokens: int, max_len: int):
    """The Bible's pairs (a fixed shuffled sample, as train_speed.py), a joint BPE trained on them,
    batched by token count as the loop batches (seed 1, epoch 0)."""
    src = data.joinpath("train.spa").read_text(encoding="utf-8").splitlines()
    tgt = data.joinpath("train.eng").read_text(encoding="utf-8").splitlines()
    order = list(range(len(src)))
    random.Random(0).shuffle(order)
    src, tgt = [src[i] for i in order[:pairs]], [tgt[i] for i in order[:pairs]]
    started = time.perf_counter()
    tok = train_bpe(src + tgt, vocab_size=bpe_vocab)
    examples, dropped = encode_examples(tgt, tok, max_len, src, tok)
    batches = batch_indices([e.size for e in examples], batch_tokens, seed=1, epoch=0)
    info = dict(
        pairs=len(examples),
        dropped=dropped,
        bpe_vocab=tok.vocab_size,
        batches=len(batches),
        tokenize_s=round(time.perf_counter() - started, 1),
    )
    return [[examples[i] for i in b] for b in batches], info


def attended_length(batches) -> int:
    """sum(l^2) / sum(l) over the target rows (l = target + </s>): flops_per_token's seq_len."""
    lengths = [len(e.tgt) + 1 for b in batches for e in b]
    return round(sum(n * n for n in lengths) / sum(lengths))


def padding(batches) -> float:
    """Share of padded positions on the target side."""
    real = sum(len(e.tgt) + 1 for b in batches for e in b)
    padded = sum(len(b) * max(len(e.tgt) + 1 for e in b) for b in batches)
    return 1 - real / padded


# ------------------------------------------------------------------------------------------------
# The two sides' training steps


def run_config(name: str, precision: str, smoke: bool):
    """configs/<name>.toml through the config loader; tf32 trains as fp32 (with TF32 matmuls)."""
    run = load_config(
        str(ROOT / "configs" / f"{name}.toml"),
        [f"train.precision={'fp32' if precision == 'tf32' else precision}"],
    )
    if smoke:
        run = dataclasses.replace(run, model=run.model.replace(**SMOKE, vocab_size=1000))
    return run


class Ours:
    """Our model, its objective and fused AdamW; `step(examples)` is one step of the loop."""

    def __init__(self, run, device, clip: float, compile_model: bool):
        torch.manual_seed(0)
        self.model = build_model(run.model).to(device).train()
        for module in self.model.modules():
            if isinstance(module, MultiHeadAttention):
                module.impl = "fused"  # what the trainer picks on a GPU (runtime/precision.py)
        self.objective = seq2seq.Seq2Seq(run, data=None)
        self.objective.bind(self.model)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = adamw(self.params, run.train)
        self.net = torch.compile(self.model) if compile_model else self.model
        self.device, self.clip, self.cfg = device, clip, run.model

    def prepare(self, examples):
        c = self.cfg
        return collate(examples, c.pad_id, c.start_id, c.eos_id).to(self.device)

    def step(self, examples) -> int:
        batch = examples if hasattr(examples, "tgt_out") else self.prepare(examples)
        out = self.objective.loss(self.net, self.model, batch, self.device)
        (out.loss / batch.n_tokens).backward()
        with record_function(OPTIMIZER):
            torch.nn.utils.clip_grad_norm_(self.params, self.clip)
            self.optimizer.step()
            increment_version(self.params)  # as the loop does after a fused step
            self.optimizer.zero_grad(set_to_none=True)
        float(out.loss.detach()), float(out.nll)  # the loop reads the step's sums back (a sync)
        return batch.n_tokens


def adamw(params, t) -> torch.optim.AdamW:
    """The loop's optimizer for the train config t (fused; the rate is immaterial to the timing)."""
    betas, eps, decay = (t.adam_beta1, t.adam_beta2), t.adam_eps, t.weight_decay
    return torch.optim.AdamW(params, lr=1e-4, betas=betas, eps=eps, weight_decay=decay, fused=True)


class Peer:
    """Hugging Face's MarianMTModel of the same size, trained on the same batches."""

    def __init__(self, run, device, clip: float):
        from transformers import MarianConfig, MarianMTModel

        m = run.model
        torch.manual_seed(0)
        self.model = (
            MarianMTModel(
                MarianConfig(
                    vocab_size=m.vocab_size,
                    d_model=m.d_model,
                    encoder_layers=m.n_encoder_layers,
                    decoder_layers=m.n_decoder_layers,
                    encoder_attention_heads=m.n_heads,
                    decoder_attention_heads=m.n_heads,
                    encoder_ffn_dim=m.d_ff,
                    decoder_ffn_dim=m.d_ff,
                    dropout=m.dropout,
                    attention_dropout=m.attention_dropout,
                    activation_dropout=m.activation_dropout,
                    activation_function="relu",
                    max_position_embeddings=m.max_positions,
                    scale_embedding=True,
                    pad_token_id=m.pad_id,
                    eos_token_id=m.eos_id,
                    decoder_start_token_id=m.start_id,
                    share_encoder_decoder_embeddings=True,
                    attn_implementation="sdpa",
                )
            )
            .to(device)
            .train()
        )
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = adamw(self.params, run.train)
        self.device, self.clip, self.cfg = device, clip, m
        self.precision, self.eps = run.train.precision, run.train.label_smoothing

    def prepare(self, examples):
        c = self.cfg
        return collate(examples, c.pad_id, c.start_id, c.eos_id).to(self.device)

    def step(self, examples) -> int:
        b = examples if hasattr(examples, "tgt_out") else self.prepare(examples)
        labels = b.tgt_out.masked_fill(b.tgt_out == self.cfg.pad_id, -100)  # (B, T)
        with objective_base.autocast(self.device, self.precision):
            logits = self.model(
                input_ids=b.src, attention_mask=b.src_mask.long(), decoder_input_ids=b.tgt_in
            ).logits  # (B, T, V)
        loss = F.cross_entropy(
            logits.float().view(-1, logits.size(-1)),
            labels.view(-1),
            ignore_index=-100,
            label_smoothing=self.eps,
        )
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, self.clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        float(loss.detach())
        return b.n_tokens


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


def measured_batches(batches, args) -> list:
    """The batches the timed rounds step through (for the FLOPs' length and the padding)."""
    used = {(args.warmup + k) % len(batches) for k in range(args.repeats * args.steps)}
    return [batches[i] for i in sorted(used)]


def measure(
    name: str, precision: str, compiled: bool, first: bool, batches, args, device, results: dict
) -> None:
    """One (model, precision, eager or compiled) cell; then, for the first mode of a (model,
    precision), the peer beside it and the profile, when asked for."""
    run = run_config(name, precision, args.smoke)
    release(device)
    ours = Ours(run, device, args.clip, compiled)
    examples = measured_batches(batches, args)  # lists of Example, read before --premade moves them
    length = attended_length(examples)
    cell = dict(
        model=name,
        precision=precision,
        mode="compiled" if compiled else "eager",
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
    if first and name in args.peer:
        with guarded(results, f"peer {name} {precision}"):
            entry = measure_peer(ours, run, batches, args, device, cell)
            results["peer"].append(entry)
            print(
                f"  peer: ours {entry['ours']['tokens_per_s']:,.0f} tok/s, HF "
                f"{entry['hf']['tokens_per_s']:,.0f}, ratio {entry['ratio']:.2f}",
                flush=True,
            )
    if first and name in args.profile and precision == args.precision[0]:
        out = Path(args.profile_out or Path(args.json).with_suffix(f".profile-{name}.txt"))
        with guarded(results, f"profile {name} {precision}"):
            key = f"{name}-{precision}-{cell['mode']}"
            steps = args.profile_steps
            run = lambda side=ours: timed_round(side, batches, 0, steps, device)[0]  # noqa: E731
            results["profile"][key] = profile_steps(run, steps, device, cell["step_ms"], out)
    del ours
    release(device)


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


@contextlib.contextmanager
def guarded(results: dict, what: str):
    """An error inside (out of memory, a failed compile) is recorded and printed, not fatal: one
    failed cell must not lose the others."""
    try:
        yield
    except Exception as e:  # noqa: BLE001
        import traceback

        traceback.print_exc()
        results["errors"].append(f"{what}: {type(e).__name__}: {e}")
        print(f"  {what} failed: {type(e).__name__}: {str(e)[:200]}", flush=True)


def print_tables(results: dict) -> None:
    f = results["facts"]
    print(
        f"\n# {f['name']}; torch {f['torch']}"
        + (f", CUDA {f['cuda']}, {f['sm_count']} SMs" if "cuda" in f else "")
        + f"; bf16 matmul {f['bf16_tflops']:.1f} TFLOP/s"
        + (f", fp32 {f['fp32_tflops']:.1f}" if "fp32_tflops" in f else "")
        + (f", tf32 {f['tf32_tflops']:.1f}" if "tf32_tflops" in f else "")
        + (f"; copy {f['copy_gbs']:,.0f} GB/s" if "copy_gbs" in f else "")
    )
    if results["cells"]:
        print(
            f"{'model':<6} {'prec':<5} {'mode':<8} {'rows':>5} {'pad':>5} {'ms/step':>8} "
            f"{'tgt tok/s':>10} {'TFLOP/s':>8} {'MFU':>6} {'peak GB':>8} {'warm-up s':>10}"
        )
        for c in results["cells"]:
            print(
                f"{c['model']:<6} {c['precision']:<5} {c['mode']:<8} {c.get('rows', 0):>5.0f} "
                f"{c.get('padding', 0):>5.1%} {c['step_ms']:>8.1f} {c['tokens_per_s']:>10,.0f} "
                f"{c['tflops']:>8.1f} {c['mfu']:>6.1%} {c.get('peak_memory_gb', 0):>8.1f} "
                f"{sum(c['warmup_step_s']):>10.1f}"
            )
    if results["peer"]:
        print(f"\n{'peer':<6} {'prec':<5} {'ours tok/s':>11} {'HF tok/s':>10} {'ours/HF':>8}")
        for p in results["peer"]:
            print(
                f"{p['model']:<6} {p['precision']:<5} {p['ours']['tokens_per_s']:>11,.0f} "
                f"{p['hf']['tokens_per_s']:>10,.0f} {p['ratio']:>8.2f}"
            )
    for key, p in results["profile"].items():
        print(
            f"\nprofile {key}: step {p['step_ms']:.2f} ms (profiled {p['profiled_step_ms']:.2f}); "
            f"table: {p['table_file']}"
        )
        for k, v in p["ms_per_step"].items():
            print(f"  {k:<22} {v:8.2f} ms {p['shares'][k]:7.1%}")
        print(f"  {'top ops':<60} {'ms/step':>8} {'share':>7} {'calls':>6}")
        for op in p["top_ops"]:
            print(
                f"  {op['op'][:60]:<60} {op['ms_per_step']:>8.2f} {op['share']:>7.1%} "
                f"{op['calls_per_step']:>6.0f}"
            )
    for error in results["errors"]:
        print(f"error: {error}")


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
        "--compile", action="store_true", help="every model compiled (as train.compile), no eager"
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
            modes = [True] if args.compile else [False, True][: 1 + (name in args.compile_model)]
            for k, compiled in enumerate(modes):
                with matmul_precision("high" if precision == "tf32" else "highest"):
                    with guarded(results, f"{name} {precision}{' compiled' * compiled}"):
                        first = k == 0
                        measure(name, precision, compiled, first, batches, args, device, results)
                write_json(results, args.json, started)
    write_json(results, args.json, started)
    print_tables(results)
    print(f"\n{time.perf_counter() - started:.0f} s in all; results: {args.json}")
    return 1 if results["errors"] else 0


def write_json(results: dict, path: str, started: float) -> None:
    """Written after every cell, so that a run cut short keeps what it measured."""
    results["seconds"] = round(time.perf_counter() - started, 1)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(results, indent=1, default=str) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
