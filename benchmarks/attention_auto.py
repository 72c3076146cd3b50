"""Does attention_impl = "auto" choose right? The real training loop with each attention path, side by side.

    python benchmarks/attention_auto.py --config configs/bible-es-en.toml --steps 40 --repeats 3
    python benchmarks/attention_auto.py --config configs/fashion-mnist-vit.toml --steps 100 --repeats 3

Trains the config for --steps steps with model.attention_impl "fused" (torch's kernel), then
"textbook" (softmax(QK^T/sqrt(d))V written out), alternating, --repeats times each, on the
config's data with the same batches (same seed), in the precision the config resolves to, and
reports tokens (positions) per second of the training steps (median over each run's steps after
the first 5, then median over repeats) and their ratio, next to what `auto` measures at the
run's typical batch (transformer.runtime.precision.resolve_attention, measured afresh: the cache is not
read). `auto` is right when it picks the path that trains faster here, or either where the two
are within 10%. Give the CPU model (printed) with every number; the machine should be otherwise idle.
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


def main() -> int:
    args = speed_parser(__doc__.splitlines()[0]).parse_args()
    overrides = speed_overrides(args)
    print(f"CPU: {cpu_name()} ({platform.machine()}), {torch.get_num_threads()} threads, torch {torch.__version__}")
    rates: dict[str, list[float]] = {"fused": [], "textbook": []}
    auto = []
    with tempfile.TemporaryDirectory() as tmp:
        config = load_config(args.config, [*overrides, 'model.attention_impl="auto"', "train.max_steps=1"])
        train(config, Path(tmp) / "auto", log=lambda line: auto.append(line) if line.startswith("model: ") else None)
        print(auto[0])
        for r in range(args.repeats):
            for impl in ("fused", "textbook"):
                config = load_config(args.config, [*overrides, f'model.attention_impl="{impl}"'])
                run = Path(tmp) / f"{impl}-{r}"
                train(config, run, log=lambda _: None)
                rates[impl].append(tokens_per_s(run))
                print(f"  round {r + 1} {impl}: {rates[impl][-1]:,.0f} tok/s", flush=True)
    fused, textbook = statistics.median(rates["fused"]), statistics.median(rates["textbook"])
    ratio = textbook / fused
    chose = "textbook" if "; attention textbook" in auto[0] else "fused"
    right = abs(ratio - 1) < 0.1 or (chose == "textbook") == (ratio > 1)
    print(f"training: fused {fused:,.0f} tok/s, textbook {textbook:,.0f} tok/s: textbook = {ratio:.2f}x fused; "
          f"auto chose {chose}: {'right' if right else 'WRONG'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
