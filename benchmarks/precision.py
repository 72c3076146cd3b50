"""Does precision = "auto" choose right? The real training loop in fp32 and in bf16, side by side.

    python benchmarks/precision.py --config configs/bible-es-en.toml --steps 40 --repeats 3

Trains the recipe for --steps steps with train.precision fp32, then bf16 (autocast), alternating,
--repeats times each, on the config's data (the same batches every time: same seed), and reports
real target tokens per second of the training steps (median over each run's steps after the
first 5, then median over repeats) and their ratio, next to what `auto` measures at the recipe's
shapes (transformer.runtime.precision, measured afresh: the cache is not read). `auto` is right on this
machine when it picks bf16 only where real training is faster in bf16, and fp32 only where real
training gains less than 1.15x from bf16 (a small gain is not worth bf16's loss of accuracy).
Give the CPU model (printed) with every number; the machine should be otherwise idle.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

import torch

from transformer.config import load_config
from transformer.runtime.measure_cache import cpu_name
from transformer.runtime.precision import resolve_precision
from transformer.training.trainer import train


def tokens_per_s(run_dir: Path, skip: int = 5) -> float:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rates = [r["tokens_per_s"] for r in records if r["split"] == "train" and r["step"] > skip]
    return statistics.median(rates)


def speed_parser(description: str) -> argparse.ArgumentParser:
    """The options every side-by-side training-speed benchmark here takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", default="configs/bible-es-en.toml")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    return parser


def speed_overrides(args: argparse.Namespace) -> list[str]:
    """--steps training steps and nothing else: no validation, saving, BLEU or log lines; then --set.
    The probes read no cache (TRANSFORMER_PRECISION_CACHE=0): each measures afresh."""
    os.environ["TRANSFORMER_PRECISION_CACHE"] = "0"
    return [f"train.max_steps={args.steps}", "train.max_minutes=0", "train.valid_every=1000000",
            "train.save_every=1000000", "train.log_every=1000000", "train.bleu_samples=0", *args.set]


def main() -> int:
    parser = speed_parser(__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    overrides = speed_overrides(args)
    base = load_config(args.config, overrides)
    m = base.model
    choice = resolve_precision("auto", "cpu", m.d_model, m.d_ff, base.data.vocab_size)
    print(f"CPU: {cpu_name()} ({platform.machine()}), {torch.get_num_threads()} threads, torch {torch.__version__}")
    print(f"auto at d_model={m.d_model} d_ff={m.d_ff} vocab={base.data.vocab_size}: {choice.describe()}")
    rates: dict[str, list[float]] = {"fp32": [], "bf16": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for precision in ("fp32", "bf16"):
                config = load_config(args.config, [*overrides, f'train.precision="{precision}"'])
                run = Path(tmp) / f"{precision}-{r}"
                train(config, run, log=lambda _: None)
                rates[precision].append(tokens_per_s(run))
                print(f"  round {r + 1} {precision}: {rates[precision][-1]:,.0f} target tok/s", flush=True)
    fp32, bf16 = statistics.median(rates["fp32"]), statistics.median(rates["bf16"])
    ratio = bf16 / fp32
    # right: never the slower one, and fp32 only where bf16 would have gained little
    right = ratio > 1 if choice.precision == "bf16" else ratio < 1.15
    print(f"training: fp32 {fp32:,.0f} tok/s, bf16 {bf16:,.0f} tok/s: bf16 = {ratio:.2f}x fp32; "
          f"auto chose {choice.precision}: {'right' if right else 'WRONG'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
