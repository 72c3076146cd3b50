"""Does T5's layout, span-corruption pretraining or multitask training pay on the Bible? (#19)

    python benchmarks/t5_bible.py --minutes 15            # every run, one after another (resumable)
    python benchmarks/t5_bible.py --minutes 15 --table    # the results table from what has run
    python benchmarks/t5_bible.py --minutes 15 --only recipe-es-en,bias-es-en   # some runs only
    python benchmarks/t5_bible.py --minutes 0.2 --out /tmp/t5-smoke   # a smoke run of the whole plan

The budget unit B (--minutes) is the training time of one single-task model; every comparison
gives both sides the same total minutes:
  (a) es->en from scratch: today's recipe (configs/bible-es-en.toml) vs T5's layout
      (configs/t5-bible-es-en.toml) vs the recipe with T5's relative bias for its positions, B each.
  (b) span corruption on both languages' training verses for B/2 (configs/bible-span.toml), then
      es->en fine-tuning for B/2, against (a)'s T5 layout from scratch for B; and the same pair in
      the recipe's layout (RoPE, LayerNorm, ReLU, tied; sinusoids before #15) against (a)'s recipe.
  (c) one text-to-text model for es->en, en->es and genre (configs/bible-t2t.toml) for 3B, against
      three single-task models of B each: (a)'s T5 es->en, the same layout en->es, and the encoder
      classifier of configs/bible-genre.toml.
Translation scores: the average of the last 3 checkpoints, the config's beam search, sacreBLEU
BLEU / chrF on the test chapters; genre: accuracy on the same chapters. The runs are timed:
the machine must be otherwise idle (name the CPU with the numbers: it is printed).
Data: transformer data bible --out data/bible; data bible-t2t --out data/bible-t2t; data bible-genre --out data/bible-genre.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import re
import subprocess
import sys
from pathlib import Path

T2T = "data/bible-t2t"
PRETRAINING = {"span", "span-recipe"}  # runs scored by their validation perplexity, not translated


def recipe_model() -> list[str]:
    """--set lines that turn configs/bible-span.toml's T5 model into the recipe's
    (configs/bible-es-en.toml: its positions, LayerNorm, ReLU, tied and scaled embeddings, ...)."""
    from transformer.config import load_config

    recipe = dataclasses.asdict(load_config("configs/bible-es-en.toml").model)
    span = dataclasses.asdict(load_config("configs/bible-span.toml").model)
    # None (share_embeddings: "as tie_embeddings says") is the recipe's default and cannot be --set
    return [f"model.{k}={json.dumps(v)}" for k, v in recipe.items() if v != span[k] and v is not None]


SWAP = ['data.text.train_src="data/bible/train.eng"', 'data.text.train_tgt="data/bible/train.spa"',
        'data.text.valid_src="data/bible/valid.eng"', 'data.text.valid_tgt="data/bible/valid.spa"']  # en->es


# The recipe's hour trains on a cosine to 0; these short budgets, like the demo and the T5 configs, on
# the inverse square root of the same peak (the runs measured here before the recipe's cosine).
ISQRT = 'train.schedule="inverse_sqrt"'


def plan(b: float) -> list[tuple[str, str, list[str]]]:
    """(run name, config, extra train arguments), in order; a fine-tuning run names its init in the arguments."""
    b2, b3 = round(b / 2, 4), round(3 * b, 4)
    return [
        ("recipe-es-en", "configs/bible-es-en.toml", [f"train.max_minutes={b}", ISQRT]),
        ("t5-es-en", "configs/t5-bible-es-en.toml", [f"train.max_minutes={b}"]),
        ("bias-es-en", "configs/bible-es-en.toml", [f"train.max_minutes={b}", ISQRT, 'model.positional="t5_bias"']),
        ("span", "configs/bible-span.toml", [f"train.max_minutes={b2}"]),
        ("span-es-en", "configs/t5-bible-es-en.toml", [f"train.max_minutes={b2}", "train.init_from=@span"]),
        ("span-recipe", "configs/bible-span.toml", [f"train.max_minutes={b2}", *recipe_model()]),
        ("span-recipe-es-en", "configs/bible-es-en.toml", [f"train.max_minutes={b2}", ISQRT,
                                                           "train.init_from=@span-recipe"]),
        ("t5-en-es", "configs/t5-bible-es-en.toml", [f"train.max_minutes={b}", *SWAP]),
        ("genre", "configs/bible-genre.toml", [f"train.max_minutes={b}"]),
        ("t2t", "configs/bible-t2t.toml", [f"train.max_minutes={b3}"]),
    ]


def sh(cmd: list[str], log: Path) -> None:
    print("$ " + " ".join(cmd), flush=True)
    with log.open("a", encoding="utf-8") as f:
        code = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT)
    if code:
        sys.exit(f"failed ({code}): see {log}")


def train(out: Path, name: str, config: str, sets: list[str]) -> Path:
    run = out / name
    if (run / "last").is_dir():
        return run
    sets = [re.sub(r"@([\w-]+)", lambda m: str(out / m.group(1) / "last"), s) for s in sets]
    cmd = ["transformer", "train", config, "--out", str(run), *[a for s in sets for a in ("--set", s)]]
    if (run / "checkpoints").is_dir():
        cmd.append("--resume")
    sh(cmd, out / f"{name}.log")
    return run


def score(out: Path, name: str) -> dict:
    """The run's scores (cached in NAME.json)."""
    file = out / f"{name}.json"
    if file.is_file():
        return json.loads(file.read_text())
    run, log = out / name, out / f"{name}.log"
    model = run / "averaged"
    if name != "genre" and not model.is_dir():
        sh(["transformer", "average", "--last", "3", str(run), "--out", str(model)], log)
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    train_rows = [m for m in metrics if m.get("split") == "train"]
    result = {"steps": train_rows[-1]["step"], "minutes": round(train_rows[-1]["elapsed_s"] / 60, 1)}
    if name in PRETRAINING:
        result["valid_ppl"] = [m for m in metrics if m.get("split") == "valid"][-1]["valid_ppl"]
    elif name == "genre":
        text = subprocess.run(["transformer", "evaluate", str(run / "best"), "--tsv", "data/bible-genre/test.tsv"],
                              capture_output=True, text=True, check=True).stdout
        result["genre accuracy"] = float(text.split("accuracy ")[1].split("%")[0])
    elif name == "t2t":
        text = subprocess.run(["transformer", "evaluate", str(model), "--pairs", f"{T2T}/test.tsv"],
                              capture_output=True, text=True, check=True).stdout
        for line in text.splitlines()[1:]:
            task, _, bleu, chrf, exact = line.rsplit(None, 4)
            result[task.strip()] = {"bleu": float(bleu), "chrf": float(chrf), "exact": float(exact.rstrip("%"))}
    else:
        src, ref = ("eng", "spa") if name == "t5-en-es" else ("spa", "eng")
        text = subprocess.run(["transformer", "evaluate", str(model), "--src", f"data/bible/test.{src}",
                               "--ref", f"data/bible/test.{ref}"], capture_output=True, text=True, check=True).stdout
        lines = text.splitlines()
        result["bleu"] = float(lines[0].split()[2])
        result["chrf"] = float(lines[1].split()[2])
    file.write_text(json.dumps(result, indent=1) + "\n")
    return result


def table(out: Path, b: float) -> str:
    names = [name for name, _, _ in plan(b)] + ["t5-es-en-unscaled"]  # the last: a run kept by hand
    got = {name: json.loads((out / f"{name}.json").read_text()) for name in names if (out / f"{name}.json").is_file()}

    def cell(name, key="bleu"):
        r = got.get(name)
        return "" if r is None or key not in r else f"{r[key]:.2f}"

    t2t = got.get("t2t", {})
    task = {k: v for k, v in t2t.items() if isinstance(v, dict)}
    es_en = next((v for k, v in task.items() if k.startswith("translate Spanish")), {})
    en_es = next((v for k, v in task.items() if k.startswith("translate English")), {})
    genre = task.get("genre", {})
    rows = [
        f"| (a) es->en, today's recipe | {b:g} | {cell('recipe-es-en')} | {cell('recipe-es-en', 'chrf')} |",
        f"| (a) es->en, T5's layout | {b:g} | {cell('t5-es-en')} | {cell('t5-es-en', 'chrf')} |",
        f"| (a) es->en, T5's layout with unscaled scores (T5's own) | {b:g} | {cell('t5-es-en-unscaled')} | {cell('t5-es-en-unscaled', 'chrf')} |",
        f"| (a) es->en, today's recipe with T5's relative bias for its positions | {b:g} | {cell('bias-es-en')} | {cell('bias-es-en', 'chrf')} |",
        f"| (b) span corruption {b / 2:g} + es->en {b / 2:g} | {b:g} | {cell('span-es-en')} | {cell('span-es-en', 'chrf')} |",
        f"| (b) the same in the recipe's layout: span corruption {b / 2:g} + es->en {b / 2:g} | {b:g} | {cell('span-recipe-es-en')} | {cell('span-recipe-es-en', 'chrf')} |",
        f"| (c) single-task en->es (T5's layout) | {b:g} | {cell('t5-en-es')} | {cell('t5-en-es', 'chrf')} |",
        f"| (c) single-task genre (encoder classifier, accuracy %) | {b:g} | {cell('genre', 'genre accuracy')} | |",
        f"| (c) one text-to-text model: es->en | {3 * b:g} (all three) | {es_en.get('bleu', '')} | {es_en.get('chrf', '')} |",
        f"| (c) one text-to-text model: en->es | | {en_es.get('bleu', '')} | {en_es.get('chrf', '')} |",
        f"| (c) one text-to-text model: genre (exact-match accuracy %) | | {genre.get('exact', '')} | |",
    ]
    return "\n".join(["| run | minutes | test BLEU | test chrF |", "|---|---:|---:|---:|", *rows])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=15.0, help="the budget unit B (default 15)")
    parser.add_argument("--out", default="runs/t5-bible", help="where the runs go (default runs/t5-bible)")
    parser.add_argument("--table", action="store_true", help="print the table of what has run, and stop")
    parser.add_argument("--only", default="", help="comma-separated run names to run (default: all, in order)")
    args = parser.parse_args()
    only = set(filter(None, args.only.split(",")))
    names = [name for name, _, _ in plan(args.minutes)]
    if only - set(names):
        parser.error(f"unknown run(s) in --only: {', '.join(sorted(only - set(names)))}; the runs: {', '.join(names)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.table:
        from transformer.runtime.measure_cache import cpu_name

        print(f"CPU: {cpu_name()} ({platform.machine()})", flush=True)
        for name, config, sets in plan(args.minutes):
            if only and name not in only:
                continue
            train(out, name, config, sets)
            print(f"{name}: {score(out, name)}", flush=True)
    print(table(out, args.minutes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
