"""Metrics on plain strings and numbers: sacreBLEU's BLEU and chrF (with their signatures),
perplexity, and classification scores. No model here: evaluation.scoring drives a model.

BLEU and chrF take detokenised hypotheses and references, one line each, and report the
sacreBLEU signature so that a number can be reproduced (Post 2018). Perplexity is
exp(summed negative log-likelihood / token count). loop_rate is the share of hypotheses that
repeat themselves as a degenerate decoder does (has_loop gives the rules).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class MetricScore:
    """A corpus-level score with what is needed to reproduce it."""

    name: str
    """BLEU or chrF."""
    score: float
    """The score, 0-100."""
    signature: str
    """sacreBLEU's signature (references, case, tokenisation, smoothing, version)."""
    detail: str
    """sacreBLEU's full line (n-gram precisions, brevity penalty, lengths)."""

    def __str__(self) -> str:
        return f"{self.detail} | {self.signature}"


def _references(
    hypotheses: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]]
) -> list[list[str]]:
    """One reference stream per reference set (sacreBLEU's layout), checked against the
    hypotheses."""
    if len(references) and isinstance(references[0], str):
        streams = [list(references)]
    else:
        streams = [list(r) for r in references]
    for k, stream in enumerate(streams):
        if len(stream) != len(hypotheses):
            which = "the references" if len(streams) == 1 else f"reference set {k}"
            raise ValueError(
                f"{len(hypotheses):,} hypotheses but {len(stream):,} lines in "
                f"{which}: "
                "they must be aligned line by line"
            )
    return streams


def bleu(
    hypotheses: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]], **options
) -> MetricScore:
    """Corpus BLEU (Papineni et al. 2002) by sacreBLEU; references: one list of lines, or several
    sets of them.

    options go to sacrebleu.metrics.BLEU (tokenize="13a", lowercase=False, ...).
    """
    from sacrebleu.metrics import BLEU

    metric = BLEU(**options)
    result = metric.corpus_score(list(hypotheses), _references(hypotheses, references))
    return MetricScore("BLEU", float(result.score), str(metric.get_signature()), str(result))


def chrf(
    hypotheses: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]], **options
) -> MetricScore:
    """Corpus chrF (Popović 2015) by sacreBLEU; options go to sacrebleu.metrics.CHRF (word_order=2
    for chrF++)."""
    from sacrebleu.metrics import CHRF

    metric = CHRF(**options)
    result = metric.corpus_score(list(hypotheses), _references(hypotheses, references))
    return MetricScore("chrF", float(result.score), str(metric.get_signature()), str(result))


def perplexity(total_nll: float, n_tokens: float, max_nll: float = math.inf) -> float:
    """exp(total negative log-likelihood in nats / number of predicted tokens), the mean NLL capped
    at max_nll (training logs a diverged step's as exp(50), not as an overflow)."""
    if n_tokens <= 0:
        raise ValueError(f"perplexity needs at least one predicted token; got n_tokens={n_tokens}")
    return math.exp(min(total_nll / n_tokens, max_nll))


@dataclass(frozen=True)
class ClassificationScores:
    """Accuracy, macro-F1, per-class precision / recall / F1 / support, and the confusion matrix."""

    labels: list[str]
    confusion: list[list[int]]
    """confusion[i][j]: examples of class i (gold) predicted as class j."""

    @property
    def total(self) -> int:
        return sum(map(sum, self.confusion))

    @property
    def accuracy(self) -> float:
        return sum(self.confusion[i][i] for i in range(len(self.labels))) / max(self.total, 1)

    def per_class(self) -> list[dict[str, float]]:
        """For each class: precision, recall, f1 (0 where undefined) and support (gold count)."""
        rows = []
        for i, label in enumerate(self.labels):
            tp = self.confusion[i][i]
            gold = sum(self.confusion[i])
            predicted = sum(row[i] for row in self.confusion)
            p = tp / predicted if predicted else 0.0
            r = tp / gold if gold else 0.0
            rows.append(
                {
                    "label": label,
                    "precision": p,
                    "recall": r,
                    "f1": 2 * p * r / (p + r) if p + r else 0.0,
                    "support": gold,
                    "predicted": predicted,
                }
            )
        return rows

    @property
    def macro_f1(self) -> float:
        """The mean F1 over the classes that occur in the gold labels or the predictions (as
        scikit-learn's f1_score(average="macro") without a label list)."""
        present = [row["f1"] for row in self.per_class() if row["support"] or row["predicted"]]
        return sum(present) / len(present) if present else 0.0


def classification_scores(
    predicted: Sequence[int], gold: Sequence[int], labels: Sequence[str]
) -> ClassificationScores:
    """Scores of predicted class indices against gold ones (indices into labels)."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predictions for {len(gold)} gold labels: give one each")
    n = len(labels)
    confusion = [[0] * n for _ in range(n)]
    for p, g in zip(predicted, gold, strict=True):
        confusion[g][p] += 1
    return ClassificationScores(list(labels), confusion)


def task_name(text: str) -> str:
    """A text-to-text input's task: what precedes its first ": " (e.g. "translate Spanish to
    English"), or "-" when there is none."""
    head, sep, _ = text.partition(": ")
    return head if sep else "-"


# Loops: the degenerate repetition a translation model falls into ("Bllllllllll.", "the who is
# the who is the who is"). The rules, and what they flag in reference text, are in has_loop's
# docstring.

_WORD_UNIT_REPEAT = re.compile(r"([^\W\d_]{1,3})\1{3,}")
"""A unit of 1-3 letters (no digits) followed by three more copies of itself: 4+ in a row."""

_OTHER_UNIT_REPEAT = re.compile(r"((?:[^\w\s]|[\d_]){1,3})\1{9,}")
"""A unit of 1-3 characters other than letters followed by nine more copies of itself."""

_TOKEN = re.compile(r"[\W_]*(.*?)([\W_]*)", re.DOTALL)
"""A whitespace token: leading punctuation, the word, trailing punctuation (\\W: neither letter
nor digit)."""


def _loop_words(text: str) -> tuple[list[str], list[bool]]:
    """The words of text (whitespace tokens, lowercased, punctuation stripped at their ends; a
    token of punctuation alone is no word), and for each whether punctuation follows it."""
    words: list[str] = []
    punctuated: list[bool] = []
    for token in text.split():
        word, trailing = _TOKEN.fullmatch(token).groups()
        if word:
            words.append(word.lower())
            punctuated.append(bool(trailing))
        elif punctuated:  # "no , no , no": the comma stands alone
            punctuated[-1] = True
    return words, punctuated


def _is_list(starts: list[int], n: int, punctuated: list[bool]) -> bool:
    """Whether punctuation follows every occurrence but the last of the n-gram starting at each of
    starts: a list or emphasis ("No, no, no", "Joram his son, Ahaziah his son, Joash his son")."""
    return all(punctuated[i + n - 1] for i in starts[:-1])


def has_loop(text: str) -> bool:
    """Whether a hypothesis loops, as a degenerate decoder does.

    Words are the whitespace tokens of text, lowercased, with punctuation stripped at their ends
    (a token of punctuation alone is no word). Text loops when any of these holds:

    (a) a span of 1-8 words occurs three times in a row ("is is is", "the who is the who is the
        who is"); when punctuation follows each occurrence, four times: "No, no, no." and
        "Yahweh's temple, Yahweh's temple, Yahweh's temple" are emphasis, not loops;
    (b) a word 3-gram occurs three or more times anywhere, and at most 2/3 of the text's 3-grams
        are distinct (repetition is much of the text: "the son of X, the son of Y, the son of Z"
        in a long verse is not a loop);
    (c) a word bigram occurs three or more times anywhere in a text of at most 12 words ("The gate
        is the gate of the gate."), unless punctuation follows each occurrence but the last (a
        list: "Joram his son, Ahaziah his son, Joash his son,");
    (d) within a word, a unit of 1-3 letters (digits never count) occurs four or more times in a
        row ("Bllllllllll", "storororororor"; not "Mississippi", "www", "1000000");
    (e) with the spaces taken out, a unit of 1-3 characters other than letters (digits,
        punctuation, symbols) occurs ten or more times in a row ("77777777777777777777", "“ “ “ “
        “ “ “ “ “ “"; not "1000000", ". . .").

    Set on the English references of data/bible (transformer data bible --src spa --tgt eng): they
    flag none of the 1,689 lines of valid and test, and 42 of train's 28,819 (0.15%: genealogies
    such as "the son of Michael, the son of Baaseiah, the son of Malchijah," and verses that
    repeat a clause three times); of Tiny Shakespeare's 32,777 non-empty lines, 13 (0.04%: "Kill,
    kill, kill, kill, kill him!"). (d) flags none of the 20,615 distinct words of both.
    """
    if _OTHER_UNIT_REPEAT.search("".join(text.split())):  # (e)
        return True
    words, punctuated = _loop_words(text)
    if any(_WORD_UNIT_REPEAT.search(word) for word in words):  # (d)
        return True
    n_words = len(words)
    for n in range(1, min(8, n_words // 3) + 1):  # (a)
        for i in range(n_words - 3 * n + 1):
            if words[i : i + n] == words[i + n : i + 2 * n] == words[i + 2 * n : i + 3 * n]:
                if not _is_list([i, i + n, i + 2 * n], n, punctuated):
                    return True
                if words[i + 3 * n : i + 4 * n] == words[i : i + n]:
                    return True
    trigrams = Counter(tuple(words[i : i + 3]) for i in range(n_words - 2))
    if trigrams and max(trigrams.values()) >= 3 and len(trigrams) <= 2 / 3 * (n_words - 2):  # (b)
        return True
    if n_words <= 12:  # (c)
        starts: dict[tuple[str, ...], list[int]] = {}
        for i in range(n_words - 1):
            starts.setdefault(tuple(words[i : i + 2]), []).append(i)
        if any(len(at) >= 3 and not _is_list(at, 2, punctuated) for at in starts.values()):
            return True
    return False


def loop_rate(hypotheses: Sequence[str]) -> float:
    """The share (0-1) of hypotheses that loop (has_loop); 0.0 for none."""
    hypotheses = list(hypotheses)
    return sum(map(has_loop, hypotheses)) / len(hypotheses) if hypotheses else 0.0
