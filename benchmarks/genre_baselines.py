"""Baselines for the Bible genre dataset (`transformer data bible-genre`): what a model must beat.

On DIR/test.tsv (lines `genre<TAB>verse`), accuracy and macro-F1 (sklearn.metrics, over the 8
genres of the table) and seconds taken (fit + predict, C search included) for:

1. majority class: always the most frequent genre of train.tsv;
2. bag of words + logistic regression: TfidfVectorizer on words, unigrams + bigrams, sublinear
   tf; LogisticRegression (lbfgs, multinomial, class_weight None), C chosen on valid.tsv by
   macro-F1 over the genres valid.tsv holds (2% of chapters: it lacks some genres); the model
   fitted on train.tsv with that C is the one scored on test.tsv.

Seconds exclude importing scikit-learn and reading the files.

    pip install -e '.[bench]'
    python -m transformer data bible-genre --lang eng --out data/bible-genre
    python benchmarks/genre_baselines.py [--data data/bible-genre] [--json FILE]
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
from collections import Counter
from pathlib import Path

GENRES = ("Law", "History", "Wisdom and Poetry", "Major Prophets", "Minor Prophets",
          "Gospels and Acts", "Epistles", "Revelation")  # transformer.data.sources.bible.GENRES, in order
C_VALUES = (1.0, 3.0, 10.0, 30.0, 100.0)


def read_tsv(path: Path) -> tuple[list[str], list[str]]:
    """(labels, texts) of a `label<TAB>text` file."""
    labels, texts = [], []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        label, sep, text = line.partition("\t")
        if not sep:
            raise SystemExit(f"{path}:{number} has no tab: each line must be `label<TAB>text`")
        labels.append(label)
        texts.append(text)
    return labels, texts


def scores(gold: list[str], predicted: list[str], labels=GENRES) -> dict:
    from sklearn.metrics import accuracy_score, f1_score

    return {"accuracy": accuracy_score(gold, predicted),
            "macro_f1": f1_score(gold, predicted, labels=list(labels), average="macro", zero_division=0)}


def majority(train: tuple[list[str], list[str]], test: tuple[list[str], list[str]], labels=GENRES) -> dict:
    start = time.perf_counter()
    label = Counter(train[0]).most_common(1)[0][0]
    predicted = [label] * len(test[1])
    return {"name": f"majority class ({label})", **scores(test[0], predicted, labels),
            "seconds": time.perf_counter() - start}


def bag_of_words(train, valid, test, labels=GENRES) -> dict:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    start = time.perf_counter()
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2)
    x_train = vectorizer.fit_transform(train[1])
    x_valid, x_test = vectorizer.transform(valid[1]), vectorizer.transform(test[1])
    present = sorted(set(valid[0]), key=list(labels).index)
    models, search = {}, {}
    for c in C_VALUES:
        models[c] = LogisticRegression(C=c, max_iter=2000).fit(x_train, train[0])
        search[c] = scores(valid[0], list(models[c].predict(x_valid)), labels=present)["macro_f1"]
    best = max(C_VALUES, key=lambda c: search[c])
    predicted = list(models[best].predict(x_test))
    return {"name": f"tf-idf 1-2 grams + logistic regression (C={best:g})", **scores(test[0], predicted, labels),
            "seconds": time.perf_counter() - start, "C": best, "valid_macro_f1_by_C": search,
            "features": x_train.shape[1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data/bible-genre", help="directory with {train,valid,test}.tsv")
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args()
    data = Path(args.data)
    if not (data / "train.tsv").exists():
        raise SystemExit(f"{data}/train.tsv not found: build the dataset with "
                         f"python -m transformer data bible-genre --lang eng --out {data}")
    train, valid, test = (read_tsv(data / f"{split}.tsv") for split in ("train", "valid", "test"))
    for name in ("sklearn.feature_extraction.text", "sklearn.linear_model", "sklearn.metrics"):
        importlib.import_module(name)  # import time is not the baselines' time
    results = [majority(train, test), bag_of_words(train, valid, test)]

    print(f"Test split of {data}: {len(test[0]):,} verses, 8 genres (train {len(train[0]):,}, valid {len(valid[0]):,})\n")
    print("| baseline | accuracy | macro-F1 | seconds |")
    print("|---|---|---|---|")
    for r in results:
        print(f"| {r['name']} | {r['accuracy']:.3f} | {r['macro_f1']:.3f} | {r['seconds']:.1f} |")
    counts = {name: Counter(split[0]) for name, split in (("train", train), ("valid", valid), ("test", test))}
    print("\n| genre | train | valid | test |")
    print("|---|---|---|---|")
    for genre in GENRES:
        print(f"| {genre} | {counts['train'][genre]:,} | {counts['valid'][genre]:,} | {counts['test'][genre]:,} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"data": str(data), "results": results, "counts": counts}, indent=2) + "\n",
                                   encoding="utf-8")


if __name__ == "__main__":
    main()
