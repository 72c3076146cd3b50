"""Decoding on a GPU: our Pipeline against Hugging Face `generate` on the same model, exported.

    PYTHONPATH=src python benchmarks/gpu_decode.py --model runs/bible-marian/best \\
        --src data/bible/test.spa --ref data/bible/test.eng --json gpu_decode.json
    PYTHONPATH=src python benchmarks/gpu_decode.py --train-seconds 90 ...  # trains a model first
    PYTHONPATH=src python benchmarks/gpu_decode.py --smoke                  # seconds, on the CPU

The model: a model directory of ours (`transformer train` writes DIR/best and DIR/last) that
exports to Hugging Face as Marian (export/hf.py): post-norm, sinusoidal positions in the
"halves" layout, no final norm. The Bible recipe (pre-norm, RoPE) does not export; the script
says so before timing anything. --train-seconds S first trains configs/bible-es-en.toml in the
Marian layout (norm_position post, positional sinusoidal, sinusoidal_layout halves, lr 1e-3,
cosine to 0 at the end of S seconds) on --device, and decodes with its best/.

The two sides. Ours: Pipeline.load(DIR, device, precision) and Pipeline.translate. Theirs:
export_hf(DIR) loaded with AutoTokenizer and AutoModelForSeq2SeqLM (sdpa attention) in the same
dtype on the same device, tokenizer(batch, padding) -> generate -> batch_decode(skip special
tokens) -> strip (translate strips too). Text in, text out on both sides.

The same search on both sides: greedy, or beam 4 with the power length penalty |Y|^alpha
(--lenpen, HF's default 1.0: transformers has no Wu penalty, so the model's decode.json penalty
is replaced on both sides) and early_stopping from decode.json. No minimum length, no repetition
guards, <pad> never generated. One length limit per batch on both sides (transformers takes one
max_new_tokens per generate call): decode.json's floor(max_len_a x source + max_len_b) for the
batch's longest source, capped by max_positions (ours alone would bound each row by its own
source; here it is given max_len_a 0 and the batch's limit as max_len_b).

Batches. The first --lines lines of --src (batch 1: the first --batch1-lines) are sorted by source
length and cut into batches of --batch lines (0 = all at once), the same batches on both sides:
ours gets each batch as one translate call with an unbounded batch_tokens (one search per batch, as
one generate call). Both sides are loaded in every precision first; the cells then run in the order
of --batch, --beams and --precision (the default puts all-at-once first), and none starts after
--max-seconds (the skipped ones are listed). Timing: one warm-up pass over the cell's first two
batches on each side, then passes over all its lines, ours and HF alternating, synchronized before
and after, until --repeats passes or --cell-seconds of timed passes (at least one); lines/s from
the median pass. Agreement: the share of lines where our output is HF's, character for character;
BLEU and chrF (sacreBLEU) of each against --ref. The JSON is rewritten after every cell.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import torch  # noqa: E402
from gpu_facts import machine, sync  # noqa: E402  (benchmarks/gpu_facts.py)

from transformer.config import load_config  # noqa: E402
from transformer.decoding.pipeline import Pipeline  # noqa: E402
from transformer.evaluation.metrics import bleu, chrf  # noqa: E402
from transformer.export.common import ExportError  # noqa: E402
from transformer.export.hf import export_hf  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MARIAN_LAYOUT = [
    "model.norm_position=post",
    "model.positional=sinusoidal",
    "model.sinusoidal_layout=halves",
]
NOT_EXPORTABLE_FIX = (
    "decode a model trained in the Marian layout: --train-seconds 90 trains one here first, or "
    "train it beforehand: transformer train configs/bible-es-en.toml --out runs/bible-marian "
    + " ".join(f"--set {o}" for o in MARIAN_LAYOUT)
    + " --set train.lr=1e-3"
)


def read_lines(path: str | Path, n: int) -> list[str]:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return lines[:n] if n else lines


# ------------------------------------------------------------------------------------------------
# A model to decode, when asked for (and for --smoke)


def train_marian_layout(
    work: Path, data: Path, device: torch.device, seconds: float, smoke: bool
) -> Path:
    """Train configs/bible-es-en.toml in the Marian layout on `data` (train/valid .spa/.eng) for
    `seconds` (--smoke: a tiny model on 800 pairs, 20 steps); returns its best/."""
    from transformer.training.trainer import train

    overrides = [
        *MARIAN_LAYOUT,
        "train.lr=1e-3",  # post-norm: below the pre-norm recipe's 1.8e-3
        f"train.device={device.type}",
        "train.valid_every=1000000",  # one validation, at the end
        "train.save_every=1000000",
        "train.keep_last=1",
        "train.bleu_samples=0",
        "train.log_every=500",
    ]
    if smoke:
        small = work / "data"
        small.mkdir(parents=True, exist_ok=True)
        for split, n in (("train", 800), ("valid", 50)):
            for lang in ("spa", "eng"):
                lines = read_lines(data / f"{split}.{lang}", n)
                (small / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
        data = small
        overrides += [
            "model.d_model=64",
            "model.d_ff=128",
            "model.n_encoder_layers=2",
            "model.n_decoder_layers=2",
            "data.vocab_size=400",
            "train.batch_tokens=1024",
            "train.max_steps=20",
            "decode.max_len_a=0.5",  # an undertrained model runs to its limit: keep it short
            "decode.max_len_b=5",
            "train.warmup_steps=20",
            "train.precision=fp32",
        ]
    else:
        overrides.append(f"train.max_minutes={seconds / 60:.3f}")
    overrides += [
        f"data.{split}_{side}={data / f'{split}.{lang}'}"
        for split in ("train", "valid")
        for side, lang in (("src", "spa"), ("tgt", "eng"))
    ]
    config = load_config(str(ROOT / "configs" / "bible-es-en.toml"), overrides)
    run = work / "run"
    shutil.rmtree(run, ignore_errors=True)
    began = time.perf_counter()
    train(config, run, log=lambda line: print(f"  train: {line}", flush=True))
    print(f"  trained in {time.perf_counter() - began:.0f} s: {run / 'best'}", flush=True)
    return run / "best"


# ------------------------------------------------------------------------------------------------
# The two sides


class Ours:
    def __init__(self, model_dir: Path, device: torch.device, precision: str, lenpen: float):
        self.pipe = Pipeline.load(model_dir, device=device, precision=precision)
        self.lenpen = lenpen

    def translate(self, lines: list[str], beams: int, limit: int) -> list[str]:
        return self.pipe.translate(
            lines,
            batch_tokens=10**9,  # the caller's batch is one search
            beam_size=beams,
            max_len_a=0.0,
            max_len_b=limit,
            length_penalty_kind="power",
            length_penalty=self.lenpen,
            min_len=0,
            n_best=1,
            no_repeat_ngram_size=0,
            repetition_penalty=1.0,
        )


class Theirs:
    def __init__(self, hf_dir: Path, device: torch.device, precision: str, lenpen: float, decode):
        import transformers

        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(hf_dir)
        self.model = transformers.AutoModelForSeq2SeqLM.from_pretrained(
            hf_dir, dtype=dtype, attn_implementation="sdpa"
        ).to(device)
        self.model.eval()
        self.device, self.lenpen, self.decode = device, lenpen, decode

    def generation_config(self, beams: int, limit: int):
        """The exported generation config with this search and length limit."""
        g = copy.deepcopy(self.model.generation_config)
        g.max_new_tokens, g.num_beams, g.do_sample, g.min_new_tokens = limit, beams, False, None
        g.early_stopping = self.decode.early_stopping if beams > 1 else False
        g.length_penalty = self.lenpen if beams > 1 else 1.0
        return g

    @torch.inference_mode()
    def translate(self, lines: list[str], beams: int, limit: int) -> list[str]:
        batch = self.tokenizer(lines, return_tensors="pt", padding=True).to(self.device)
        ids = self.model.generate(**batch, generation_config=self.generation_config(beams, limit))
        return [t.strip() for t in self.tokenizer.batch_decode(ids, skip_special_tokens=True)]


# ------------------------------------------------------------------------------------------------
# One cell: a precision, a search, a batch size


def batches_of(lines: list[str], lengths: list[int], size: int) -> list[list[int]]:
    """Line numbers sorted by source length, cut into batches of `size` (0: one batch)."""
    order = sorted(range(len(lines)), key=lambda i: lengths[i])
    size = size or len(order)
    return [order[k : k + size] for k in range(0, len(order), size)]


def length_limit(pipe: Pipeline, longest: int) -> int:
    """A batch's output limit on both sides: decode.json's floor(max_len_a x source + max_len_b)
    for its longest source, capped by the position table (as ours caps it)."""
    d = pipe.decode
    limit = math.floor(d.max_len_a * longest + d.max_len_b)
    return max(1, min(limit, pipe.model.config.max_positions))


def one_pass(side, lines, batches, limits, beams, device) -> tuple[float, list[str]]:
    """Seconds to translate every batch (synchronized before and after), and the outputs."""
    outputs = [""] * len(lines)
    sync(device)
    began = time.perf_counter()
    for batch, limit in zip(batches, limits, strict=True):
        texts = side.translate([lines[i] for i in batch], beams, limit)
        for i, text in zip(batch, texts, strict=True):
            outputs[i] = text
    sync(device)
    return time.perf_counter() - began, outputs


def measure_cell(ours, theirs, lines, refs, lengths, size, beams, args, device) -> dict:
    batches = batches_of(lines, lengths, size)
    limits = [length_limit(ours.pipe, max(lengths[i] for i in batch)) for batch in batches]
    for side in (ours, theirs):
        one_pass(side, lines, batches[:2], limits[:2], beams, device)  # warm-up
    t_ours, t_hf, spent = [], [], 0.0
    while len(t_ours) < args.repeats and (not t_ours or spent < args.cell_seconds):
        s, out_ours = one_pass(ours, lines, batches, limits, beams, device)
        t, out_hf = one_pass(theirs, lines, batches, limits, beams, device)
        t_ours.append(s)
        t_hf.append(t)
        spent += s + t
    same = [a == b for a, b in zip(out_ours, out_hf, strict=True)]
    n = len(lines)
    cell = dict(
        lines=n,
        batches=len(batches),
        passes=len(t_ours),
        ours_s=t_ours,
        hf_s=t_hf,
        ours_lines_per_s=n / statistics.median(t_ours),
        hf_lines_per_s=n / statistics.median(t_hf),
        speedup=statistics.median(h / o for o, h in zip(t_ours, t_hf, strict=True)),
        agree=sum(same) / n,
        bleu_ours=bleu(out_ours, refs).score,
        bleu_hf=bleu(out_hf, refs).score,
        chrf_ours=chrf(out_ours, refs).score,
        chrf_hf=chrf(out_hf, refs).score,
        differ=[dict(line=i + 1, ours=out_ours[i], hf=out_hf[i]) for i in range(n) if not same[i]][
            :5
        ],
    )
    return cell


# ------------------------------------------------------------------------------------------------
# The run


@contextlib.contextmanager
def guarded(results: dict, what: str):
    """An error inside is recorded and printed, not fatal: a failed cell must not lose the rest."""
    try:
        yield
    except Exception as e:  # noqa: BLE001
        import traceback

        traceback.print_exc()
        results["errors"].append(f"{what}: {type(e).__name__}: {e}")
        print(f"  {what} failed: {type(e).__name__}: {str(e)[:200]}", flush=True)


def facts(device: torch.device) -> dict:
    import transformers

    return {**machine(device), "transformers": transformers.__version__}


def print_table(results: dict) -> None:
    f = results["facts"]
    print(
        f"\n# {f['name']}; torch {f['torch']}, transformers {f['transformers']}; model "
        f"{results['model']}; source ids equal on both sides: {results.get('same_ids', '?')}"
    )
    print(
        f"{'prec':<5} {'search':<7} {'batch':>5} {'lines':>5} {'passes':>6} {'ours l/s':>9} "
        f"{'HF l/s':>8} {'ours/HF':>7} {'agree':>6} {'BLEU ours':>9} {'BLEU HF':>8} "
        f"{'chrF ours':>9} {'chrF HF':>8}"
    )
    for c in results["cells"]:
        print(
            f"{c['precision']:<5} {c['search']:<7} {c['batch']:>5} {c['lines']:>5} "
            f"{c['passes']:>6} {c['ours_lines_per_s']:>9.1f} {c['hf_lines_per_s']:>8.1f} "
            f"{c['speedup']:>7.2f} {c['agree']:>6.1%} {c['bleu_ours']:>9.2f} {c['bleu_hf']:>8.2f} "
            f"{c['chrf_ours']:>9.2f} {c['chrf_hf']:>8.2f}"
        )
    if results["skipped"]:
        print(f"skipped (--max-seconds): {', '.join(results['skipped'])}")
    for error in results["errors"]:
        print(f"error: {error}")


def write_json(results: dict, path: str, started: float) -> None:
    """Written after every cell, so that a run cut short keeps what it measured."""
    results["seconds"] = round(time.perf_counter() - started, 1)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(results, indent=1, default=str) + "\n", encoding="utf-8")


def run_cells(model_dir, hf_dir, src, refs, args, device, results, started) -> None:
    """Both sides loaded in every precision, then the cells in the order of --batch, --beams and
    --precision (the most wanted first): none starts once --max-seconds have passed."""
    sides = {}
    for precision in args.precision:
        with guarded(results, f"loading {precision}"):
            ours = Ours(model_dir, device, precision, args.lenpen)
            sides[precision] = (
                ours,
                Theirs(hf_dir, device, precision, args.lenpen, ours.pipe.decode),
            )
    if not sides:
        return
    ours, theirs = next(iter(sides.values()))
    encoded = ours.pipe.encode_sources(src)[0]
    lengths = [len(ids) for ids in encoded]
    results["same_ids"] = theirs.tokenizer(src).input_ids == encoded
    for size in args.batch:
        n = min(args.batch1_lines, len(src)) if size == 1 else len(src)
        for beams in args.beams:
            for precision, (ours, theirs) in sides.items():
                what = f"{precision} beam {beams} batch {size or 'all'}"
                if args.max_seconds and time.perf_counter() - started > args.max_seconds:
                    results["skipped"].append(what)
                    continue
                with guarded(results, what):
                    cell = measure_cell(
                        ours, theirs, src[:n], refs[:n], lengths[:n], size, beams, args, device
                    )
                    search = "greedy" if beams == 1 else f"beam{beams}"
                    cell.update(precision=precision, search=search, batch=size or "all")
                    results["cells"].append(cell)
                    print(
                        f"  {what}: ours {cell['ours_lines_per_s']:.1f} lines/s, HF "
                        f"{cell['hf_lines_per_s']:.1f}, agree {cell['agree']:.1%}",
                        flush=True,
                    )
                write_json(results, args.json, started)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--model", default=None, help="our model directory (e.g. runs/NAME/best)")
    p.add_argument(
        "--train-seconds",
        type=float,
        default=0.0,
        help="first train a Marian-layout Bible model this long and decode with it",
    )
    p.add_argument(
        "--train-data", default=None, help="train/valid .spa/.eng (default: --src's dir)"
    )
    p.add_argument("--src", default="data/bible/test.spa")
    p.add_argument("--ref", default="data/bible/test.eng")
    p.add_argument("--lines", type=int, default=512, help="first N lines of --src (0: all)")
    p.add_argument("--batch1-lines", type=int, default=32, help="lines of the batch-1 cells")
    p.add_argument(
        "--batch", nargs="+", type=int, default=[0, 16, 1], help="0: all at once (measured first)"
    )
    p.add_argument("--beams", nargs="+", type=int, default=[1, 4], help="1: greedy")
    p.add_argument("--precision", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    p.add_argument("--lenpen", type=float, default=1.0, help="beam: alpha of |Y|^alpha, both sides")
    p.add_argument("--repeats", type=int, default=3, help="timed passes per cell, at most")
    p.add_argument(
        "--cell-seconds",
        type=float,
        default=10.0,
        help="no further pass once a cell's timed passes took this long",
    )
    p.add_argument("--threads", type=int, default=0, help="CPU threads for torch (0: its default)")
    p.add_argument(
        "--max-seconds",
        type=float,
        default=0.0,
        help="start no cell after this many seconds of the run (0: no limit); skipped ones listed",
    )
    p.add_argument("--work", default=None, help="where the export (and training) go; default tmp")
    p.add_argument("--json", default="gpu_decode.json")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="a tiny model trained here, 6 lines, batches 1/3/all: seconds on a CPU",
    )
    args = p.parse_args()
    if args.smoke:
        args.threads = args.threads or 1  # a shared CPU: no oversubscription
        args.lines, args.batch1_lines, args.batch = 6, 2, [0, 3, 1]
        args.repeats, args.cell_seconds = 1, 0.0
    if not args.model and not args.train_seconds and not args.smoke:
        p.error(f"give --model DIR or --train-seconds S; to {NOT_EXPORTABLE_FIX}")
    return args


def main() -> int:
    args = parse_args()
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    started = time.perf_counter()
    work = Path(args.work or tempfile.mkdtemp(prefix="gpu_decode-"))
    results = {
        "args": vars(args),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "facts": facts(device),
        "cells": [],
        "skipped": [],
        "errors": [],
    }
    model_dir = Path(args.model) if args.model else None
    if model_dir is None:
        data = Path(args.train_data or Path(args.src).parent)
        print(f"training a Marian-layout model on {data} ({device})", flush=True)
        model_dir = train_marian_layout(work, data, device, args.train_seconds, args.smoke)
        results["trained_s"] = round(time.perf_counter() - started, 1)
    results["model"] = str(model_dir)
    hf_dir = work / "hf"
    shutil.rmtree(hf_dir, ignore_errors=True)
    try:
        export_hf(model_dir, hf_dir)
    except ExportError as e:
        print(f"error: {e}\nto {NOT_EXPORTABLE_FIX}")
        return 2
    src, refs = read_lines(args.src, args.lines), read_lines(args.ref, args.lines)
    if len(src) != len(refs):
        print(f"error: {args.src} has {len(src)} lines, {args.ref} {len(refs)}: align them")
        return 2
    kept = [i for i, line in enumerate(src) if line.strip()]  # an empty source has no batch
    src, refs = [src[i] for i in kept], [refs[i] for i in kept]
    print(f"{len(src)} lines; exported to {hf_dir}; device {device}", flush=True)
    run_cells(model_dir, hf_dir, src, refs, args, device, results, started)
    write_json(results, args.json, started)
    print_table(results)
    print(f"\n{time.perf_counter() - started:.0f} s in all; results: {args.json}")
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
