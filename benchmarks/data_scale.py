"""Corpora of any size: preparation time, time to the first step and peak memory, by corpus size.

The Bible recipe (configs/bible-es-en.toml) on its training pairs repeated K times, each copy
shuffled (seeded), for each K of --repeats (default 1, 30, 156: 29k, 867k, 4.5M pairs). Per size,
each command in a fresh process, its process tree's RSS summed and sampled every 0.1 s:

1. `transformer data prepare` on a cold cache: tokenizer training (at most data.tokenizer_sample
   pairs) + tokenizing everything into the arrays; and (--cold) `transformer train` on a cold cache
   until "step 1": what a user's first run on a new corpus waits;
2. `transformer train --set train.max_steps=1`: time until "step 1" is logged, with the corpus
   prepared (what every later run and every experiment on the same data pays), peak RSS;
3. the same run resumed to step 2 (`--resume`): time until "step 2";
4. with --torchrun: 2 processes (`torchrun --nproc_per_node=2`, 1 thread each), total RSS.

Then the model's and optimizer's own state (parameters + Adam's two moments, float32) for the
target "peak RSS <= state + 1 GB".

    PYTHONPATH=src python benchmarks/data_scale.py [--repeats 1 30 156] [--work /tmp/data_scale] [--torchrun]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "bible-es-en.toml"


def tree_rss_mb(pid: int) -> float:
    """RSS of pid and all its descendants, MB."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            pass
    return total


def run(argv: list[str], until: str | None = None, env: dict | None = None) -> tuple[float, float, str]:
    """Run argv; return (seconds until a stdout line starting with `until` appeared, or until exit;
    peak RSS of the process tree in MB; the output)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})})
    peak = [0.0]
    done = threading.Event()

    def sample():
        while not done.wait(0.1):
            peak[0] = max(peak[0], tree_rss_mb(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    seen, lines = None, []
    for line in proc.stdout:
        lines.append(line)
        if until and seen is None and line.startswith(until):
            seen = time.perf_counter() - start
    proc.wait()
    done.set()
    sampler.join()
    out = "".join(lines)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{out[-3000:]}")
    return (seen if seen is not None else time.perf_counter() - start), peak[0], out


def write_corpus(work: Path, repeats: int) -> tuple[Path, Path, int]:
    src_lines = (ROOT / "data/bible/train.spa").read_text(encoding="utf-8").splitlines()
    tgt_lines = (ROOT / "data/bible/train.eng").read_text(encoding="utf-8").splitlines()
    src, tgt = work / f"x{repeats}.spa", work / f"x{repeats}.eng"
    if not (src.exists() and tgt.exists()):
        rng = random.Random(repeats)
        with open(src.with_suffix(".tmp1"), "w") as fs, open(tgt.with_suffix(".tmp2"), "w") as ft:
            for _ in range(repeats):
                order = list(range(len(src_lines)))
                rng.shuffle(order)
                fs.writelines(src_lines[i] + "\n" for i in order)
                ft.writelines(tgt_lines[i] + "\n" for i in order)
        src.with_suffix(".tmp1").rename(src)
        tgt.with_suffix(".tmp2").rename(tgt)
    return src, tgt, repeats * len(src_lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, nargs="+", default=[1, 30, 156])
    parser.add_argument("--work", default="/tmp/data_scale")
    parser.add_argument("--torchrun", action="store_true")
    parser.add_argument("--cold", action="store_true", help="also: train to step 1 on a cold cache")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    cli = [sys.executable, "-m", "transformer.cli"]
    rows = []
    for k in args.repeats:
        src, tgt, pairs = write_corpus(work, k)
        cache = work / f"cache-x{k}"
        shutil.rmtree(cache, ignore_errors=True)
        sets = ["--set", f'data.text.train_src="{src}"', "--set", f'data.text.train_tgt="{tgt}"', "--set", f'data.cache="{cache}"']
        prep_s, prep_mb, out = run(cli + ["data", "prepare", str(CONFIG)] + sets)
        print(out.strip().splitlines()[-1], flush=True)
        run_dir = work / f"run-x{k}"
        shutil.rmtree(run_dir, ignore_errors=True)
        train = cli + ["train", str(CONFIG), "--out", str(run_dir)] + sets + [
            "--set", "train.log_every=1", "--set", "train.save_every=1", "--set", "train.valid_every=1000",
            "--set", "train.precision=\"fp32\""]
        first_s, train_mb, out = run(train + ["--set", "train.max_steps=1"], until="step 1 ")
        if args.cold:  # the same run with nothing prepared: tokenizer, arrays, then the step
            cold = work / f"cache-x{k}-cold"
            shutil.rmtree(cold, ignore_errors=True)
            shutil.rmtree(run_dir, ignore_errors=True)
            cold_sets = ["--set", f'data.cache="{cold}"']
            cold_s, cold_mb, _ = run(train + cold_sets + ["--set", "train.max_steps=1"], until="step 1 ")
            shutil.rmtree(cold, ignore_errors=True)
            shutil.rmtree(run_dir, ignore_errors=True)
            run(train + ["--set", "train.max_steps=1"], until="step 1 ")  # the run --resume continues
        resume_s, resume_mb, _ = run(train + ["--set", "train.max_steps=2", "--resume"], until="step 2 ")
        row = {"pairs": pairs, "prepare_s": prep_s, "prepare_mb": prep_mb, "first_step_s": first_s,
               "train_mb": train_mb, "resume_s": resume_s, "resume_mb": resume_mb}
        if args.cold:
            row["cold_s"], row["cold_mb"] = cold_s, cold_mb
        if args.torchrun:
            shutil.rmtree(run_dir, ignore_errors=True)
            ddp = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                   "-m", "transformer.cli"] + train[3:] + ["--set", "train.max_steps=1"]
            row["torchrun_s"], row["torchrun_mb"], _ = run(ddp, until="step 1 ", env={"OMP_NUM_THREADS": "1"})
        rows.append(row)
        print(row, flush=True)

    import torch

    from transformer import build_model
    from transformer.config import load_config

    config = load_config(CONFIG, [])
    model = build_model(config.model.replace(vocab_size=8000))
    state_mb = sum(p.numel() for p in model.parameters()) * 4 * 3 / 2**20
    print(f"\nmodel + Adam state: {state_mb:.0f} MB; torch {torch.__version__}; "
          f"{os.cpu_count()} CPUs; nothing else running is assumed\n")
    print("| pairs | prepare (cold) s | prepare peak RSS MB | to step 1 s | train peak RSS MB | resume to step 2 s "
          "| resume peak RSS MB |" + (" torchrun x2 to step 1 s | torchrun total peak RSS MB |" if args.torchrun else "")
          + (" cold cache, to step 1 s | its peak RSS MB |" if args.cold else ""))
    print("|---|---|---|---|---|---|---|" + ("---|---|" if args.torchrun else "") + ("---|---|" if args.cold else ""))
    for r in rows:
        print(f"| {r['pairs']:,} | {r['prepare_s']:.1f} | {r['prepare_mb']:.0f} | {r['first_step_s']:.1f} | "
              f"{r['train_mb']:.0f} | {r['resume_s']:.1f} | {r['resume_mb']:.0f} |" +
              (f" {r['torchrun_s']:.1f} | {r['torchrun_mb']:.0f} |" if args.torchrun else "") +
              (f" {r['cold_s']:.1f} | {r['cold_mb']:.0f} |" if args.cold else ""))


if __name__ == "__main__":
    main()
