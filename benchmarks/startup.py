"""Start-up cost of the command line, side by side with `python -c "import torch"`.

What a user waits for before the first answer: `transformer --help`, `--version` and a usage error
(none of which need torch), and a one-line `echo "..." | transformer translate MODEL` (start-up,
loading the model directory, one translation, exit) against importing torch alone, which any
torch program pays. Each command is run as a fresh process, the commands interleaved within each
repeat after one warm-up round (bytecode cached, as users have it); reported are the medians and
the median of the per-repeat differences against `import torch`.

MODEL defaults to a random model of the Bible recipe's shape (configs/bible-es-en.toml: 7.6M
parameters, 8,000-token vocabulary) written to a temporary directory; `--model DIR` times yours.

    PYTHONPATH=src python benchmarks/startup.py [--repeats 7] [--model DIR]
    ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 \
        PYTHONPATH=src python benchmarks/startup.py      # as on a typical (AVX2) CPU
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def random_recipe_model(out: Path) -> Path:
    """The Bible recipe's model shape with random weights and a small BPE, as a model directory. Its
    decode.json is the recipe's (beam 4) but stops at 12 tokens, about what a short sentence's
    translation takes: random weights would otherwise never say </s> and decode to the limit."""
    import dataclasses

    import torch

    import transformer
    from transformer.config import load_config
    from transformer.data.tokenizer import train_bpe

    recipe = load_config(ROOT / "configs" / "bible-es-en.toml")
    torch.manual_seed(0)
    tokenizer = train_bpe(["Y dijo Dios: Sea la luz, y fué la luz."] * 50, vocab_size=300)
    decode = dataclasses.replace(recipe.decode, max_len_a=0.0, max_len_b=12)
    model = transformer.build_model(recipe.model)
    return transformer.save_model(model, out, tokenizer=tokenizer, decode=decode)


def timed(command: list[str], stdin: str | None = None) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # users' Pythons cache bytecode: the warm-up writes it
    start = time.perf_counter()
    subprocess.run(command, input=stdin, text=True, capture_output=True, env=env, check=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--model", help="a model directory to translate with (default: a random recipe-sized one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or str(random_recipe_model(Path(tmp) / "model"))
        cli = [sys.executable, "-m", "transformer"]
        commands = {
            'python -c "import torch"': ([sys.executable, "-c", "import torch"], None),
            "transformer --help": ([*cli, "--help"], None),
            "transformer --version": ([*cli, "--version"], None),
            "transformer translate (usage error)": ([*cli, "translate"], None),
            "echo ... | transformer translate MODEL": ([*cli, "translate", model], "Y dijo Dios: Sea la luz.\n"),
        }
        for command, stdin in commands.values():  # warm-up: bytecode written, files cached
            timed(command, stdin)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeats):
            for name, (command, stdin) in commands.items():
                times[name].append(timed(command, stdin))
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else platform.processor()
    import torch

    print(f"CPU: {cpu}; {os.cpu_count()} cores; torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()}); "
          f"Python {platform.python_version()}; median of {args.repeats} runs each")
    base = times['python -c "import torch"']
    print("| command | median s | vs import torch (median of differences) |\n|---|---:|---:|")
    for name, values in times.items():
        diff = statistics.median(v - b for v, b in zip(values, base, strict=True))
        print(f"| `{name}` | {statistics.median(values):.3f} | {diff:+.3f} |")


if __name__ == "__main__":
    main()
