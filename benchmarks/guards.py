"""The repetition guards' settings chosen on validation data: BLEU, chrF and loop rate per split for
each pair of no_repeat_ngram_size x repetition_penalty, with the decoding time.

    python benchmarks/guards.py runs/es-en/averaged                    # data/{bible,ui,debian}/valid
    python benchmarks/guards.py MODEL --ngram 0,3,4 --penalty 1.0,1.2 --lines 600 --json out.json

Each split's valid.spa is translated (beam 4 unless --beam; the model's other decoding settings)
under every combination; --lines takes N evenly spaced lines of a split (the UI split's validation
catalogs are large). The last column sums the splits' decoding seconds: the guards' cost. Run it with
the machine to itself. The CPU is printed with the table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from transformer.runtime.measure_cache import cpu_name

DEFAULT_SPLITS = {"bible": "data/bible", "ui": "data/ui", "debian": "data/debian"}




def numbers(text: str, kind) -> list:
    return [kind(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="model directory")
    parser.add_argument("--split", action="append", metavar="NAME=DIR", help="a split folder")
    parser.add_argument("--ngram", default="0,3,4", help="no_repeat_ngram_size values (0 = off)")
    parser.add_argument("--penalty", default="1.0,1.2", help="repetition_penalty values (1 = off)")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument(
        "--lines", type=int, default=0, help="N evenly spaced lines of each split (0 = all)"
    )
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's)")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)

    import torch

    from transformer.decoding.pipeline import Pipeline
    from transformer.evaluation.metrics import bleu, chrf, loop_rate

    if args.threads:
        torch.set_num_threads(args.threads)
    splits = dict(s.split("=", 1) for s in args.split) if args.split else DEFAULT_SPLITS
    data = {}
    for name, folder in splits.items():
        src, ref = Path(folder) / "valid.spa", Path(folder) / "valid.eng"
        if not (src.is_file() and ref.is_file()):
            print(f"skipping {name}: no {src} / {ref}", file=sys.stderr)
            continue
        lines = src.read_text(encoding="utf-8").splitlines()
        refs = ref.read_text(encoding="utf-8").splitlines()
        if args.lines and len(lines) > args.lines:  # evenly spaced: every catalog or book
            step = len(lines) / args.lines
            keep = [int(i * step) for i in range(args.lines)]
            lines, refs = [lines[i] for i in keep], [refs[i] for i in keep]
        data[name] = (lines, refs)
    pipeline = Pipeline.load(args.model)
    rows = []
    for n in numbers(args.ngram, int):
        for p in numbers(args.penalty, float):
            row = {"no_repeat_ngram_size": n, "repetition_penalty": p, "seconds": 0.0}
            for name, (lines, refs) in data.items():
                started = time.perf_counter()
                out = pipeline.translate(
                    lines, beam_size=args.beam, no_repeat_ngram_size=n, repetition_penalty=p
                )
                row["seconds"] += time.perf_counter() - started
                row[name] = {
                    "bleu": round(bleu(out, refs).score, 2),
                    "chrf": round(chrf(out, refs).score, 2),
                    "loops": round(100 * loop_rate(out), 2),
                }
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print(f"\nCPU: {cpu_name()}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(
        f"model: {args.model}; beam {args.beam}; "
        + ", ".join(f"{k} {len(v[0]):,} valid lines" for k, v in data.items())
    )
    head = (
        "| no-repeat n-gram | repetition penalty | "
        + " | ".join(f"{k} BLEU | {k} chrF | {k} loops %" for k in data)
        + " | decode s |"
    )
    print(head)
    print("|" + "---:|" * (head.count("|") - 1))
    for r in rows:
        cells = [str(r["no_repeat_ngram_size"]), f"{r['repetition_penalty']:g}"]
        for k in data:
            cells += [f"{r[k]['bleu']:.2f}", f"{r[k]['chrf']:.2f}", f"{r[k]['loops']:.2f}"]
        print("| " + " | ".join(cells) + f" | {r['seconds']:.1f} |")
    print(f"\ncommand: python benchmarks/guards.py {' '.join(argv or sys.argv[1:])}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
