"""Fine-tuning with LoRA adapters against fine-tuning every weight: peak memory and speed, side by
side on one machine.

Each variant (model x full / LoRA x batch size) trains in a fresh process for --steps steps of its
config (fp32, no validation, the same data and batches), and reports its peak resident memory
(ru_maxrss of the process: what the operating system had to give it, torch and the data
included) and its training tokens/s over steps --skip+1 .. --steps (from metrics.jsonl: start-up,
the precision probe and the final checkpoint are not counted). Variants run one after the other,
--runs times each, alternating; the median is reported.

    python benchmarks/lora_memory.py [--models smollm2 minilm] [--batch-tokens 1024 4096]
        [--steps 8] [--skip 3] [--runs 1] [--activation-checkpointing] [--json F]

--activation-checkpointing trains every variant with train.activation_checkpointing (each layer
recomputed in the backward pass): the activations, which at these batches are most of the memory,
then shrink to a layer's input per layer, and what LoRA saves (the frozen weights' gradients and
Adam's moments) is most of what is left.

Needs models/smollm2 with data/wiki-chat (SmolLM2 as a chat model: objective chat) and
models/all-MiniLM-L6-v2 with data/commentary-qa (MiniLM as a question answerer: objective qa);
the commands are in configs/smollm2-lora-summaries.toml and configs/commentary-qa-minilm.toml.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = {
    "smollm2": ("configs/smollm2-lora-summaries.toml", {"data.text.valid_chat": None}),
    "minilm": ("configs/commentary-qa-minilm.toml", {"data.squad.valid": None}),
}
LORA = {"rank": 16, "alpha": 32.0, "targets": ["q_proj", "k_proj", "v_proj", "out_proj", "w1", "w2"]}
"""The adapters of both LoRA variants: every product of attention and the feed-forward (SmolLM2's
gated W3 too)."""

CHILD = r"""
import dataclasses, json, resource, sys
from transformer.config import build_run_config, load_config
from transformer.training.trainer import train

path, out, lora, batch, steps, changes, recompute = json.loads(sys.argv[1])
values = load_config(path).to_dict()
for key, value in changes.items():
    section, *names = key.split(".")
    table = values[section]
    for name in names[:-1]:
        table = table[name]
    table[names[-1]] = value
t = values["train"]
t.update(batch_tokens=batch, max_steps=steps, max_minutes=0.0, precision="fp32", log_every=1,
         valid_every=10**6, save_every=10**6, lora=lora, activation_checkpointing=recompute)
train(build_run_config(values), out, log=lambda _: None)
print(json.dumps({"maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def run_variant(model: str, lora: bool, batch: int, steps: int, skip: int, recompute: bool) -> dict:
    config, changes = MODELS[model]
    if model == "smollm2":
        lora_cfg = {**LORA, "targets": [*LORA["targets"], "w3"]} if lora else None
    else:
        lora_cfg = LORA if lora else None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        argument = json.dumps([config, str(out), lora_cfg, batch, steps, changes, recompute])
        done = subprocess.run([sys.executable, "-c", CHILD, argument], cwd=ROOT, check=True,
                              capture_output=True, text=True)
        rss = json.loads(done.stdout.strip().splitlines()[-1])["maxrss_kb"] / 1024
        records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = {r["step"]: r for r in records if r["split"] == "train"}
    start, end = train[skip], train[steps]
    tokens = sum(train[s]["tokens"] for s in range(skip + 1, steps + 1))
    return {"peak_rss_mb": rss, "tokens_per_s": tokens / (end["elapsed_s"] - start["elapsed_s"])}


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=["smollm2", "minilm"])
    parser.add_argument("--batch-tokens", nargs="+", type=int, default=[1024, 4096])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--skip", type=int, default=3, help="steps not timed (warm-up)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--activation-checkpointing", action="store_true",
                        help="every variant with train.activation_checkpointing")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    rows = []
    for model in args.models:
        for batch in args.batch_tokens:
            results = {"full": [], "lora": []}
            for _ in range(args.runs):
                for mode in ("full", "lora"):
                    results[mode].append(run_variant(model, mode == "lora", batch, args.steps, args.skip,
                                                     args.activation_checkpointing))
            row = {"model": model, "batch_tokens": batch}
            for mode, runs in results.items():
                row[f"{mode}_rss_mb"] = statistics.median(r["peak_rss_mb"] for r in runs)
                row[f"{mode}_tokens_per_s"] = statistics.median(r["tokens_per_s"] for r in runs)
            rows.append(row)
            print(json.dumps(row), flush=True)
    recompute = ", activation checkpointing" if args.activation_checkpointing else ""
    print(f"\n{cpu_name()}, {args.steps} steps ({args.skip} not timed), fp32{recompute}, median of {args.runs}\n")
    print("| model | batch tokens | peak RSS full | peak RSS LoRA | LoRA / full | tokens/s full | "
          "tokens/s LoRA | LoRA / full |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['model']} | {r['batch_tokens']:,} | {r['full_rss_mb']:,.0f} MB | {r['lora_rss_mb']:,.0f} MB | "
              f"{r['lora_rss_mb'] / r['full_rss_mb']:.2f} | {r['full_tokens_per_s']:,.0f} | "
              f"{r['lora_tokens_per_s']:,.0f} | {r['lora_tokens_per_s'] / r['full_tokens_per_s']:.2f}x |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
