"""nanoGPT beside us on tiny Shakespeare (characters), on this CPU, one run after the other.

What it runs (each with the machine to itself; start nothing else meanwhile):
1. nanoGPT's CPU "baby GPT" command from its README (../shared/peers/nanogpt/PROVENANCE.md):
   4 layers, 4 heads, 128 wide, context 64, batch 12, 2,000 iterations, no dropout,
   `--device=cpu --compile=False --eval_iters=20`, plus `--always_save_checkpoint=True` so that
   the weights of its last iteration are kept (it saves at each evaluation, every 250). Its files
   are used unchanged from a scratch folder; its data step (prepare.py, which downloads) is done
   here as prepare.py does it, from ../shared/data/tinyshakespeare.txt: the sorted characters as
   the vocabulary, the first 90% of the characters for training, the last 10% for validation.
2. Ours at nanoGPT's settings: configs/shakespeare-char.toml with nanoGPT's shape and recipe
   (`BABY` below: the same model, 12 x 64 tokens a step, 2,000 steps, AdamW lr 1e-3 with 100
   warmup steps and cosine decay to 1e-4, betas 0.9/0.99, weight decay 0.1, clipping at 1, no
   dropout, no bias, tied embeddings), validated once at the end.
3. Ours, the recipe as shipped (configs/shakespeare-char.toml) for the same wall-clock time as
   nanoGPT's whole run took, unless --no-recipe: train.max_minutes is nanoGPT's time less what
   run 2 spent outside its training clock (start-up, writing the model), so that the whole run
   takes about as long as nanoGPT's.

Validation loss, computed the same way for every model: nats per character over nanoGPT's
validation split (data/shakespeare/valid.txt = the last 111,540 characters), in blocks of 64
characters side by side, each character predicted from those before it in its block. nanoGPT's
model is read from its checkpoint with its own model.py; ours with `transformer evaluate --text
--window 64` (its stream starts with <s> and ends with </s>: one more character predicted, and
the </s>, of 111,540; a difference below 1e-4 nats). nanoGPT's own printed estimate (20 random
batches) is shown too.

Speed: training tokens per second at the median step (nanoGPT: its printed time per iteration;
ours: metrics.jsonl), and each run's wall-clock time from start to exit; the baby runs are done
--repeats times in pairs (nanoGPT's, then ours), and the table gives the medians and the median of
the pairs' ratios (a 2-core VM's speed drifts by 10-20% from one minute to the next). Both run in fp32
(nanoGPT: no autocast on CPU; ours: train.precision fp32 here, as `auto` chooses on CPUs without
fast bf16; on a CPU with AMX, --precision auto lets ours take bf16 and the table says so).

    python benchmarks/nanogpt.py --out runs/nanogpt --json runs/nanogpt/results.json
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEER = ROOT.parent / "shared" / "peers" / "nanogpt"
TEXT = ROOT.parent / "shared" / "data" / "tinyshakespeare.txt"
CONFIG = ROOT / "configs" / "shakespeare-char.toml"
NANOGPT_BABY = [
    "--device=cpu", "--compile=False", "--eval_iters=20", "--log_interval=1", "--block_size=64",
    "--batch_size=12", "--n_layer=4", "--n_head=4", "--n_embd=128", "--max_iters=2000",
    "--lr_decay_iters=2000", "--dropout=0.0", "--always_save_checkpoint=True",
]
BABY = {
    "model.n_decoder_layers": 4, "model.n_heads": 4, "model.d_model": 128, "model.d_ff": 512,
    "model.max_positions": 64, "model.dropout": 0.0, "model.bias": "false",
    "model.scale_embedding": "false", "data.text.block_size": 64, "train.batch_tokens": 768,
    "train.max_steps": 2000, "train.max_minutes": 0, "train.lr": 1e-3, "train.min_lr": 1e-4,
    "train.warmup_steps": 100, "train.adam_beta1": 0.9, "train.adam_beta2": 0.99,
    "train.weight_decay": 0.1, "train.clip_norm": 1.0, "train.valid_every": 2000,
    "train.save_every": 2000,
}
"""Our settings for nanoGPT's baby run (the rest from configs/shakespeare-char.toml)."""
WINDOW = 64




def prepare_nanogpt(work: Path, text: str) -> None:
    """nanoGPT's scratch folder: its files (unchanged) and data/shakespeare_char as its
    prepare.py writes them."""
    import numpy as np

    for name in ("train.py", "model.py", "configurator.py"):
        shutil.copy(PEER / name, work / name)
    shutil.copytree(PEER / "config", work / "config", dirs_exist_ok=True)
    data = work / "data" / "shakespeare_char"
    data.mkdir(parents=True, exist_ok=True)
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    n = len(text)
    for name, part in (("train.bin", text[: int(n * 0.9)]), ("val.bin", text[int(n * 0.9) :])):
        np.array([stoi[c] for c in part], dtype=np.uint16).tofile(data / name)
    with open(data / "meta.pkl", "wb") as f:
        pickle.dump({"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": stoi}, f)


def run_nanogpt(work: Path, threads: int) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    cmd = [sys.executable, "train.py", "config/train_shakespeare_char.py", *NANOGPT_BABY]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    (work / "train.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode:
        raise SystemExit(f"nanoGPT failed (exit {proc.returncode}); its log: {work / 'train.log'}")
    times = [float(t) for t in re.findall(r"^iter \d+: loss [\d.]+, time ([\d.]+)ms", proc.stdout, re.M)]
    reported = re.findall(r"^step (\d+): train loss ([\d.]+), val loss ([\d.]+)", proc.stdout, re.M)
    return {
        "wall_s": wall,
        "step_ms": statistics.median(times[1:]),
        "tokens_per_s": 12 * 64 / (statistics.median(times[1:]) / 1000),
        "reported_val_loss": float(reported[-1][2]),
        "command": "python train.py config/train_shakespeare_char.py " + " ".join(NANOGPT_BABY),
    }


def nanogpt_valid_loss(work: Path) -> float:
    """nats per character of nanoGPT's checkpoint over its validation split, in blocks of 64."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, str(work))
    from model import GPT, GPTConfig  # nanoGPT's own model code, from the scratch folder

    ckpt = torch.load(work / "out-shakespeare-char" / "ckpt.pt", map_location="cpu", weights_only=False)
    model = GPT(GPTConfig(**ckpt["model_args"]))
    model.load_state_dict({k.removeprefix("_orig_mod."): v for k, v in ckpt["model"].items()})
    model.eval()
    val = torch.from_numpy(np.fromfile(work / "data" / "shakespeare_char" / "val.bin", dtype=np.uint16).astype(np.int64))
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(val) - 1, WINDOW):
            x = val[start : min(start + WINDOW, len(val) - 1)][None]
            y = val[start + 1 : start + 1 + x.shape[1]][None]
            logits, _ = model(x, y)
            total += float(F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1), reduction="sum"))
            count += y.numel()
    return total / count


def run_ours(out: Path, settings: dict, threads: int, precision: str) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    sets = [f"{k}={v}" for k, v in {**settings, "train.precision": precision, "train.num_threads": threads}.items()]
    cmd = ["transformer", "train", str(CONFIG), "--out", str(out)]
    for s in sets:
        cmd += ["--set", s]
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    out.mkdir(parents=True, exist_ok=True)
    (out / "train.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode:
        raise SystemExit(f"our training failed (exit {proc.returncode}); its log: {out / 'train.log'}")
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    steps = [r for r in records if r["split"] == "train"]
    rates = [r["tokens_per_s"] for r in steps[5:]] or [r["tokens_per_s"] for r in steps]
    evaluate = subprocess.run(
        ["transformer", "evaluate", str(out / "last"), "--text", "data/shakespeare/valid.txt",
         "--window", str(WINDOW)], cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    ).stdout
    nats = float(evaluate.split("; ")[1].split(" nats = ")[0])
    header = next((line for line in proc.stdout.splitlines() if line.startswith("model:")), "")
    return {
        "wall_s": wall,
        "trained_s": max(r.get("elapsed_s", 0) for r in records),
        "steps": steps[-1]["step"],
        "tokens_per_s": statistics.median(rates),
        "valid_loss": nats,
        "precision": re.search(r"precision (\w+)", header).group(1) if header else precision,
        "command": " ".join(cmd[:5]) + "".join(f" --set {s}" for s in sets),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="runs/nanogpt", help="folder for the runs (default runs/nanogpt)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads for both (default: all cores)")
    p.add_argument("--precision", default="fp32", help="ours: fp32 (default) or auto")
    p.add_argument("--repeats", type=int, default=3, help="pairs of baby runs, nanoGPT's then ours; speeds are medians (default 3)")
    p.add_argument("--no-recipe", action="store_true", help="leave out our recipe at nanoGPT's wall-clock time")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()
    if not PEER.is_dir() or not TEXT.is_file():
        raise SystemExit(f"needs nanoGPT at {PEER} and the text at {TEXT}")
    import torch

    from transformer.runtime.measure_cache import cpu_name

    out = (ROOT / args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    text = TEXT.read_text(encoding="utf-8")
    subprocess.run(["transformer", "data", "split-text", str(TEXT), "--out", "data/shakespeare"],
                   cwd=ROOT, check=True, capture_output=True)
    work = out / "nanogpt"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    prepare_nanogpt(work, text)
    print(f"CPU: {cpu_name()} ({torch.backends.cpu.get_cpu_capability()}), {args.threads} threads, torch {torch.__version__}")
    results = {"cpu": cpu_name(), "capability": torch.backends.cpu.get_cpu_capability(), "threads": args.threads}
    pairs = []
    for r in range(args.repeats):  # nanoGPT's run and ours, one after the other, each time
        print(f"nanoGPT baby run ({r + 1}/{args.repeats}) ...", flush=True)
        shutil.rmtree(work / "out-shakespeare-char", ignore_errors=True)
        nano = run_nanogpt(work, args.threads)
        print(f"ours at nanoGPT's settings ({r + 1}/{args.repeats}) ...", flush=True)
        pairs.append((nano, run_ours(out / "baby", BABY, args.threads, args.precision)))
    results["speed_ratio"] = statistics.median(b["tokens_per_s"] / a["tokens_per_s"] for a, b in pairs)
    for key, k in (("nanogpt", 0), ("ours_baby", 1)):
        results[key] = {
            **pairs[-1][k],
            **{f: statistics.median(pair[k][f] for pair in pairs) for f in ("wall_s", "tokens_per_s")},
            "runs": [{f: pair[k][f] for f in ("wall_s", "tokens_per_s")} for pair in pairs],
        }
    results["nanogpt"]["valid_loss"] = nanogpt_valid_loss(work)
    if not args.no_recipe:
        baby = results["ours_baby"]
        start_up = baby["wall_s"] - baby["trained_s"]  # outside max_minutes: start-up, saving
        minutes = (results["nanogpt"]["wall_s"] - start_up) / 60
        print(f"our recipe for {minutes:.2f} minutes ...", flush=True)
        results["ours_recipe"] = run_ours(out / "recipe", {"train.max_minutes": round(minutes, 3)}, args.threads, args.precision)
    n = results["nanogpt"]
    print()
    print("| run | wall-clock | steps | train tokens/s | valid loss (nats/char) |")
    print("|---|---|---|---|---|")
    print(f"| nanoGPT baby (fp32) | {n['wall_s']:.0f} s | 2,000 | {n['tokens_per_s']:,.0f} | {n['valid_loss']:.4f} (its estimate {n['reported_val_loss']:.4f}) |")
    for key, name in (("ours_baby", "ours, nanoGPT's settings"), ("ours_recipe", "ours, shakespeare-char recipe")):
        if key in results:
            r = results[key]
            ratio = results["speed_ratio"] if key == "ours_baby" else r["tokens_per_s"] / n["tokens_per_s"]
            print(f"| {name} ({r['precision']}) | {r['wall_s']:.0f} s | {r['steps']:,} | {r['tokens_per_s']:,.0f} "
                  f"({ratio:.2f}x) | {r['valid_loss']:.4f} ({r['valid_loss'] - n['valid_loss']:+.4f}) |")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
