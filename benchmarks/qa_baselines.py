"""Baselines for the commentary question answering (`transformer data commentary-qa`): what a
trained span head must beat, in SQuAD's exact match and F1 and in verse-level F1
(transformer.evaluation), on DIR/test.json:

1. whole chapter: the answer is the whole context;
2. first k verses: the chapter's first k verses, k the median answer length in verses of
   train.json;
3. word overlap (lexical): of every run of k consecutive verses, the one holding the most distinct
   words of the heading (lowercased words of three or more letters, STOPWORDS left out; the
   earliest on a tie);
4. with --encoder MODEL (a sentence-embedding model such as all-MiniLM-L6-v2, imported): that
   encoder untrained under a fresh sentence head, the start of objective qa_sentences: each verse's
   cosine with the heading, standardized over the chapter, and the best run of verses above the
   chapter's mean (transformer.data.sentences).

    python -m transformer data commentary-qa --out data/commentary-qa
    python benchmarks/qa_baselines.py [--data data/commentary-qa] [--encoder MODEL] [--json F]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

from transformer.data.squad import Question, read_squad
from transformer.evaluation.overlap import set_f1, squad_scores

STOPWORDS = frozenset(
    "the and his her him their them they that this with from for are was were all not but has had "
    "have who whom which what when shall will unto upon into out its our your you thee thou thy "
    "she one two".split()
)


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]{3,}", text.lower()) if w not in STOPWORDS}


def verse_texts(q: Question) -> list[str]:
    bounds = [*q.verse_starts, len(q.context)]
    return [q.context[bounds[i] : bounds[i + 1]].strip() for i in range(len(q.verse_starts))]


def span(q: Question, first: int, last: int) -> tuple[str, set[int]]:
    """The text of verses first..last (1-based) and their set."""
    verses = verse_texts(q)
    return " ".join(verses[first - 1 : last]), set(range(first, last + 1))


def overlap_window(q: Question, k: int) -> tuple[str, set[int]]:
    wanted = words(q.question)
    verses = [words(v) for v in verse_texts(q)]
    k = min(k, len(verses))
    scores = [len(wanted & set().union(*verses[i : i + k])) for i in range(len(verses) - k + 1)]
    first = scores.index(max(scores)) + 1
    return span(q, first, first + k - 1)


def score(name: str, questions: list[Question], picks: list[tuple[str, set[int]]]) -> dict:
    result = squad_scores([t for t, _ in picks], [[t for t, _ in q.answers] for q in questions])
    gold = [set(range(q.verses[0], q.verses[1] + 1)) for q in questions]
    f1 = [set_f1(p, g) for (_, p), g in zip(picks, gold, strict=True)]
    return {"name": name, **result, "verse_f1": 100 * sum(f1) / len(f1)}


def untrained_sentence_head(encoder: str, questions: list[Question]) -> list[tuple[str, set[int]]]:
    """Each question's answer from encoder's embeddings under a fresh sentence head."""
    from transformer.data.tokenizer import EncoderTokens
    from transformer.decoding.answer import answer_sentences
    from transformer.decoding.pipeline import Pipeline
    from transformer.evaluation.scoring import covered_verses
    from transformer.training.objectives.encoder import pretrained_under
    from transformer.training.objectives.sentences import HEADS

    pipe = Pipeline.load(encoder)
    model = pretrained_under(pipe.model, HEADS, encoder).eval()
    tokens = EncoderTokens(pipe.source_tokenizer, pipe.special_tokens)
    answers = answer_sentences(
        model, pipe.source_tokenizer, tokens, [q.question for q in questions],
        [q.context for q in questions], [q.verse_starts for q in questions], 192,
    )
    return [(a.text, covered_verses(a.start, a.end, q.verse_starts, len(q.context)))
            for a, q in zip(answers, questions, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data/commentary-qa", help="directory with {train,test}.json")
    parser.add_argument("--encoder", help="a sentence-embedding model directory, scored untrained under a "
                        "sentence head (e.g. models/all-MiniLM-L6-v2)")
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args()
    data = Path(args.data)
    if not (data / "test.json").exists():
        raise SystemExit(f"{data}/test.json not found: build it with "
                         f"python -m transformer data commentary-qa --out {data}")
    train, test = read_squad(data / "train.json"), read_squad(data / "test.json")
    k = round(statistics.median(q.verses[1] - q.verses[0] + 1 for q in train))
    results = [
        score("whole chapter", test, [span(q, 1, len(q.verse_starts)) for q in test]),
        score(f"first {k} verses", test, [span(q, 1, min(k, len(q.verse_starts))) for q in test]),
        score(f"word overlap: the {k} verses with most heading words", test,
              [overlap_window(q, k) for q in test]),
    ]
    if args.encoder:
        results.append(score(f"{Path(args.encoder).name} untrained, sentence head", test,
                             untrained_sentence_head(args.encoder, test)))
    print(f"Test split of {data}: {len(test):,} questions (median answer in train: {k} verses)\n")
    print("| baseline | exact match | F1 | verse F1 |")
    print("|---|---:|---:|---:|")
    for r in results:
        print(f"| {r['name']} | {r['exact_match']:.1f} | {r['f1']:.1f} | {r['verse_f1']:.1f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"data": str(data), "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
