"""Word, character, BPE or Unigram tokens on the Bible es->en, the same minutes of training each.

Each variant trains configs/bible-es-en.toml with its [data] tokenizer for --minutes (one after
another, never two at once), averages its last 5 checkpoints as the recipe does, and is scored on
the test split (beam 4, the recipe's decoding): BLEU and chrF (sacreBLEU, as `transformer
evaluate`), tokens per sentence and <unk> share on the test side, training tokens/s (the median
of the logged rates) and steps reached, and three example translations.

    PYTHONPATH=src python benchmarks/granularity.py [--minutes 8] [--variants word-8k word-32k char bpe-8k unigram-8k]
        [--out runs/granularity]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "bible-es-en.toml"
VARIANTS = {
    "word-8k": ['data.tokenizer="word"', "data.vocab_size=8000"],
    "word-32k": ['data.tokenizer="word"', "data.vocab_size=32000"],
    # characters: ~4x the tokens of BPE, so the length limits grow with them
    "char": ['data.tokenizer="char"', "data.vocab_size=8000", "data.max_len=600", "model.max_positions=1024"],
    "bpe-8k": ['data.tokenizer="bpe"', "data.vocab_size=8000"],
    "unigram-8k": ['data.tokenizer="unigram"', "data.vocab_size=8000"],
}
EXAMPLES = ["¿De quién es?", "Y dijo Dios: Sea la luz; y fué la luz.", "El Señor es mi pastor; nada me faltará."]


def cli(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "transformer.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    if proc.returncode != 0:
        raise SystemExit(f"transformer {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout + proc.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=8.0)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--out", default="runs/granularity")
    args = parser.parse_args()
    from transformer.data.tokenizer import UNK_ID
    from transformer.decoding.pipeline import Pipeline
    from transformer.model_dir import load_tokenizers

    test_src = (ROOT / "data/bible/test.spa").read_text(encoding="utf-8").splitlines()
    test_tgt = (ROOT / "data/bible/test.eng").read_text(encoding="utf-8").splitlines()
    rows = []
    for name in args.variants:
        run = Path(args.out) / name
        sets = VARIANTS[name] + [f"train.max_minutes={args.minutes}"]
        if not (run / "last").exists():
            cli("train", str(CONFIG), "--out", str(run), *[a for s in sets for a in ("--set", s)])
        cli("average", "--last", "5", str(run), "--out", str(run / "averaged"))
        scores = cli("evaluate", str(run / "averaged"), "--src", "data/bible/test.spa", "--ref", "data/bible/test.eng")
        bleu = float(re.search(r"BLEU\s*=?\s*([\d.]+)", scores).group(1))
        chrf = float(re.search(r"chrF\S*\s*=?\s*([\d.]+)", scores).group(1))
        records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        train = [r for r in records if r["split"] == "train"]
        source, target = load_tokenizers(run)
        src_ids, tgt_ids = source.encode_batch(test_src), target.encode_batch(test_tgt)
        n_src, n_tgt = sum(map(len, src_ids)), sum(map(len, tgt_ids))
        pipeline = Pipeline.load(run / "averaged")
        row = {"variant": name, "vocabulary": target.vocab_size, "steps": train[-1]["step"],
               "tokens_per_s": statistics.median(r["tokens_per_s"] for r in train),
               "src_tokens": n_src / len(test_src), "tgt_tokens": n_tgt / len(test_tgt),
               "src_unk": sum(i == UNK_ID for ids in src_ids for i in ids) / n_src,
               "tgt_unk": sum(i == UNK_ID for ids in tgt_ids for i in ids) / n_tgt,
               "bleu": bleu, "chrf": chrf, "examples": pipeline.translate(EXAMPLES)}
        rows.append(row)
        print(json.dumps(row, ensure_ascii=False), flush=True)
    print(f"\n{args.minutes:g} minutes each; test split {len(test_src):,} verses, beam 4\n")
    print("| tokenizer | vocabulary | source tokens/verse | target tokens/verse | source <unk> | target <unk> "
          "| steps | target tokens/s | BLEU | chrF |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['variant']} | {r['vocabulary']:,} | {r['src_tokens']:.1f} | {r['tgt_tokens']:.1f} | "
              f"{r['src_unk']:.2%} | {r['tgt_unk']:.2%} | {r['steps']:,} | {r['tokens_per_s']:,.0f} | "
              f"{r['bleu']:.1f} | {r['chrf']:.1f} |")
    print()
    for i, example in enumerate(EXAMPLES):
        print(f"- {example}")
        for r in rows:
            print(f"  - {r['variant']}: {r['examples'][i]}")


if __name__ == "__main__":
    main()
