"""What does each piece of T5's layout cost in training speed? The Bible recipe, one piece added at a time.

    python benchmarks/layout_speed.py --steps 40 --repeats 3 --set 'train.precision="bf16"' --set 'model.attention_impl="textbook"'

Trains configs/bible-es-en.toml for --steps steps, then the same with T5's pieces added one after
another (each row keeps the rows above it), until the last row is configs/t5-bible-es-en.toml's
model: the relative bias for the recipe's positions (sinusoids when measured, RoPE since #15);
RMSNorm without biases; gated GELU (d_ff 683: three matrices, the same parameters); shared inputs with an untied output; unscaled embeddings;
dropout 0.1 on the attention weights and the FFN's hidden layer. The variants alternate in rounds
on the same batches (same seed); tokens/s is real target tokens per second of the training steps
(median over each run's steps after the first 5, then median over rounds), and each row's ratio is
to the recipe's. Pin precision and attention path with --set (as above) so that every row runs the
same kernels. Give the CPU model (printed) with every number; the machine should be otherwise idle.
"""

from __future__ import annotations

import platform
import statistics
import sys
import tempfile
from pathlib import Path

import torch

from transformer.config import load_config
from transformer.runtime.measure_cache import cpu_name
from transformer.training.trainer import train

sys.path.insert(0, str(Path(__file__).resolve().parent))
from precision import speed_overrides, speed_parser, tokens_per_s  # noqa: E402  (benchmarks/precision.py)

# (row name, the --set overrides it adds to the rows above it)
STEPS = [
    ("the recipe (configs/bible-es-en.toml)", []),
    ("+ relative bias for the positions", ['model.positional="t5_bias"']),
    ("+ RMSNorm without biases", ['model.norm="rmsnorm"', "model.norm_eps=1e-6", "model.bias=false"]),
    ("+ gated GELU, d_ff 683", ['model.activation="geglu_tanh"', "model.d_ff=683"]),
    ("+ untied output (shared inputs)", ["model.tie_embeddings=false", "model.share_embeddings=true"]),
    ("+ unscaled embeddings", ["model.scale_embedding=false"]),
    ("+ attention and FFN dropout 0.1 (= T5's layout)", ["model.attention_dropout=0.1", "model.activation_dropout=0.1"]),
]


def main() -> int:
    args = speed_parser(__doc__.splitlines()[0]).parse_args()
    overrides = speed_overrides(args)
    print(f"CPU: {cpu_name()} ({platform.machine()}), {torch.get_num_threads()} threads, torch {torch.__version__}")
    rows, sets = [], []
    for name, extra in STEPS:
        sets = [*sets, *extra]
        rows.append((name, list(sets)))
    rates: list[list[float]] = [[] for _ in rows]
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for i, (name, sets) in enumerate(rows):
                run = Path(tmp) / f"{i}-{r}"
                train(load_config(args.config, [*overrides, *sets]), run, log=lambda _: None)
                rates[i].append(tokens_per_s(run))
                print(f"  round {r + 1} {name}: {rates[i][-1]:,.0f} tok/s", flush=True)
    base = statistics.median(rates[0])
    print("| model | tok/s | vs the recipe |\n|---|---:|---:|")
    for (name, _), got in zip(rows, rates, strict=True):
        print(f"| {name} | {statistics.median(got):,.0f} | {statistics.median(got) / base:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
