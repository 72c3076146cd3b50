"""Training tokens/s of this checkout against another commit, side by side on the same machine.

Both run the same config for --steps steps in fresh processes, alternating (A B A B ...), --runs
times each; a run's speed is its target tokens over the wall time of steps --skip+1 .. --steps
(from metrics.jsonl, so start-up and data preparation are not counted). Reports the median of
each and the ratio. The other commit is checked out with `git worktree` into a temporary folder.

    PYTHONPATH=src python benchmarks/loop_speed.py --ref c99fbba [--config configs/bible-es-en.toml]
        [--steps 150] [--skip 20] [--runs 3] [--set 'train.precision="auto"' ...]

Training runs in fp32 unless a --set says otherwise (--set overrides are applied after the defaults).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tokens_per_s(checkout: Path, config: Path, steps: int, skip: int, out: Path, overrides: list[str]) -> float:
    shutil.rmtree(out, ignore_errors=True)
    sets = [f"train.max_steps={steps}", "train.log_every=10", "train.valid_every=100000", "train.save_every=100000",
            'train.precision="fp32"', "train.max_minutes=1000.0", *overrides]
    argv = [sys.executable, "-m", "transformer.cli", "train", str(config), "--out", str(out)]
    for s in sets:
        argv += ["--set", s]
    subprocess.run(argv, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(checkout / "src")}, check=True,
                   capture_output=True)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = {r["step"]: r for r in records if r["split"] == "train"}
    start, end = train[skip], train[steps]
    tokens = sum(train[s]["tokens"] for s in range(skip + 1, steps + 1))
    return tokens / (end["elapsed_s"] - start["elapsed_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ref", required=True, help="the commit to compare with")
    parser.add_argument("--config", default=str(ROOT / "configs" / "bible-es-en.toml"))
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--skip", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], help="a config override for both sides, as on `train`")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="loop_speed-"))
    ref = work / "ref"
    subprocess.run(["git", "worktree", "add", "--detach", str(ref), args.ref], cwd=ROOT, check=True, capture_output=True)
    try:
        speeds: dict[str, list[float]] = {"this checkout": [], args.ref: []}
        for i in range(args.runs):
            for name, checkout in (("this checkout", ROOT), (args.ref, ref)):
                speed = tokens_per_s(checkout, Path(args.config), args.steps, args.skip, work / f"run-{i}-{name[:4]}",
                                     args.set)
                speeds[name].append(speed)
                print(f"run {i + 1} {name}: {speed:,.0f} target tokens/s", flush=True)
        mine, theirs = (statistics.median(v) for v in speeds.values())
        print(f"\nmedian: this checkout {mine:,.0f}, {args.ref} {theirs:,.0f} tokens/s: ratio {mine / theirs:.3f}")
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(ref)], cwd=ROOT, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
