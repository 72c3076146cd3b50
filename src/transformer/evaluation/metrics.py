"""Evaluation on plain strings: sacreBLEU's BLEU and chrF (with their signatures), and perplexity.

BLEU and chrF take detokenised hypotheses and references, one line each, and report the
sacreBLEU signature so that a number can be reproduced (Post 2018). Perplexity is
exp(summed negative log-likelihood / token count); `model_nll` computes both for a model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ..decoding.step import inference, pad_rows
from ..model.transformer import DecoderOnly, EncoderDecoder


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


def _references(hypotheses: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]]) -> list[list[str]]:
    """One reference stream per reference set (sacreBLEU's layout), checked against the hypotheses."""
    if len(references) and isinstance(references[0], str):
        streams = [list(references)]
    else:
        streams = [list(r) for r in references]
    for k, stream in enumerate(streams):
        if len(stream) != len(hypotheses):
            which = "the references" if len(streams) == 1 else f"reference set {k}"
            raise ValueError(f"{len(hypotheses):,} hypotheses but {len(stream):,} lines in {which}: "
                             "they must be aligned line by line")
    return streams


def bleu(hypotheses: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]], **options) -> MetricScore:
    """Corpus BLEU (Papineni et al. 2002) by sacreBLEU; references: one list of lines, or several sets of them.

    options go to sacrebleu.metrics.BLEU (tokenize="13a", lowercase=False, ...).
    """
    from sacrebleu.metrics import BLEU

    metric = BLEU(**options)
    result = metric.corpus_score(list(hypotheses), _references(hypotheses, references))
    return MetricScore("BLEU", float(result.score), str(metric.get_signature()), str(result))


def chrf(hypotheses: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]], **options) -> MetricScore:
    """Corpus chrF (Popović 2015) by sacreBLEU; options go to sacrebleu.metrics.CHRF (word_order=2 for chrF++)."""
    from sacrebleu.metrics import CHRF

    metric = CHRF(**options)
    result = metric.corpus_score(list(hypotheses), _references(hypotheses, references))
    return MetricScore("chrF", float(result.score), str(metric.get_signature()), str(result))


def perplexity(total_nll: float, n_tokens: int) -> float:
    """exp(total negative log-likelihood in nats / number of predicted tokens)."""
    if n_tokens <= 0:
        raise ValueError(f"perplexity needs at least one predicted token; got n_tokens={n_tokens}")
    return math.exp(total_nll / n_tokens)


def model_nll(model: torch.nn.Module, sequences: Sequence[Sequence[int]],
              sources: Sequence[Sequence[int]] | None = None, batch_size: int = 32) -> tuple[float, int]:
    """Summed NLL (nats) and predicted-token count of token sequences under a model, teacher-forced.

    Decoder-only: each sequence predicts its tokens after the first (start them with <s>).
    Encoder-decoder: sequences are targets for `sources`; the decoder starts from the start
    token and predicts every target token and then </s>.
    """
    if not isinstance(model, EncoderDecoder | DecoderOnly):
        raise ValueError(f"{type(model).__name__} has no next-token distribution: perplexity needs an "
                         "encoder-decoder or decoder-only model")
    cfg = model.config
    enc_dec = isinstance(model, EncoderDecoder)
    if enc_dec and (sources is None or len(sources) != len(sequences)):
        raise ValueError("an encoder-decoder model needs `sources`, one per target sequence")
    device = next(model.parameters()).device
    total, count = 0.0, 0
    with inference(model):
        for lo in range(0, len(sequences), batch_size):
            rows = [torch.as_tensor(list(s), dtype=torch.long) for s in sequences[lo : lo + batch_size]]
            if enc_dec:
                start = torch.tensor([cfg.start_id])
                eos = torch.tensor([cfg.eos_id])
                inputs = [torch.cat([start, r]) for r in rows]
                targets = [torch.cat([r, eos]) for r in rows]
            else:
                inputs, targets = [r[:-1] for r in rows], [r[1:] for r in rows]
            keep = [i for i, t in enumerate(targets) if len(t)]
            if not keep:
                continue
            ids, mask = pad_rows([inputs[i] for i in keep], cfg.pad_id, left=False, device=device)
            tgt, _ = pad_rows([targets[i] for i in keep], cfg.pad_id, left=False, device=device)
            if enc_dec:
                src_rows = [torch.as_tensor(list(sources[lo + i]), dtype=torch.long) for i in keep]
                src, src_mask = pad_rows(src_rows, cfg.pad_id, left=False, device=device)
                logits = model(src, ids, src_mask, mask)
            else:
                logits = model(ids, mask)
            lp = torch.log_softmax(logits.float(), dim=-1).gather(-1, tgt[..., None]).squeeze(-1)  # (B, T)
            total -= float(lp[mask].sum())
            count += int(mask.sum())
    return total, count


def text_perplexity(model: torch.nn.Module, lines: Sequence[str], encode: Callable[[str], list[int]],
                    batch_size: int = 32) -> float:
    """Perplexity of a language model over lines of text; encode turns a line into ids (with <s> first)."""
    nll, n = model_nll(model, [encode(line) for line in lines if line.strip()], batch_size=batch_size)
    return perplexity(nll, n)


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
            rows.append({"label": label, "precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0,
                         "support": gold, "predicted": predicted})
        return rows

    @property
    def macro_f1(self) -> float:
        """The mean F1 over the classes that occur in the gold labels or the predictions (as scikit-learn's
        f1_score(average="macro") without a label list)."""
        present = [row["f1"] for row in self.per_class() if row["support"] or row["predicted"]]
        return sum(present) / len(present) if present else 0.0


def classification_scores(predicted: Sequence[int], gold: Sequence[int], labels: Sequence[str]) -> ClassificationScores:
    """Scores of predicted class indices against gold ones (indices into labels)."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predictions for {len(gold)} gold labels: give one each")
    n = len(labels)
    confusion = [[0] * n for _ in range(n)]
    for p, g in zip(predicted, gold, strict=True):
        confusion[g][p] += 1
    return ClassificationScores(list(labels), confusion)


def score_classifier(pipeline, path, on_truncate: Callable[[list[int]], None] | None = None,
                     ) -> tuple[ClassificationScores, list[int]]:
    """A classifier's scores on labelled data, and its predicted label indices: a `label<TAB>text` file
    for a text classifier, a prepared split or a folder of class folders for an image classifier.
    A label the model does not know is a ValueError naming it (and the line, for text); texts longer
    than the model takes are truncated, their file line numbers (1-based) given to on_truncate."""
    from ..data.images import load_images
    from ..data.text import iter_labelled

    config = pipeline.model.config
    labels = pipeline.labels
    if config.vision is None:
        if labels is None:
            raise ValueError(f"the model has no labels.json: scoring {path} needs a classifier trained here")
        rows = list(iter_labelled(path))
        index = {label: i for i, label in enumerate(labels)}
        for line, label, _ in rows:
            if label not in index:
                raise ValueError(f"{path} line {line + 1}: label {label!r} is not one of the model's ({', '.join(labels)})")
        cut = None if on_truncate is None else (lambda numbers: on_truncate([rows[n - 1][0] + 1 for n in numbers]))
        results = pipeline.classify([text for _, _, text in rows], top_k=1, on_truncate=cut)
        gold = [index[label] for _, label, _ in rows]
    else:
        labels = labels or [str(i) for i in range(config.n_classes)]
        data = load_images(path, config.vision.channels, config.vision.image_size)
        index = {label: i for i, label in enumerate(labels)}
        unknown = [name for name in data.names if name not in index]
        if unknown:
            raise ValueError(f"{path}: label {unknown[0]!r} is not one of the model's ({', '.join(labels)})")
        gold = [index[data.names[i]] for i in data.labels.tolist()]
        results = pipeline.classify_images(data.images)
    predicted = [index[r[0][0]] for r in results]
    return classification_scores(predicted, gold, labels), predicted


def task_name(text: str) -> str:
    """A text-to-text input's task: what precedes its first ": " (e.g. "translate Spanish to English"),
    or "-" when there is none."""
    head, sep, _ = text.partition(": ")
    return head if sep else "-"


def score_pairs(pipeline, path, on_truncate: Callable[[list[int]], None] | None = None,
                **decode) -> tuple[dict[str, dict[str, float]], list[str]]:
    """A text-to-text model on an `input<TAB>target` file, per task (task_name of each input) and over
    all lines: {task: {"lines", "bleu", "chrf", "exact"}} (exact: the share of outputs equal to the
    target, the accuracy of a task whose targets are labels), and the outputs in file order.
    Inputs longer than the model takes are truncated, their file line numbers (1-based) given to on_truncate."""
    from ..data.text import iter_pairs

    rows = list(iter_pairs(path))
    cut = None if on_truncate is None else (lambda numbers: on_truncate([rows[n - 1][0] + 1 for n in numbers]))
    outputs = pipeline.translate([x for _, x, _ in rows], on_truncate=cut, **decode)
    groups: dict[str, list[int]] = {}
    for i, (_, x, _) in enumerate(rows):
        groups.setdefault(task_name(x), []).append(i)
    if len(groups) > 1:
        groups["all"] = list(range(len(rows)))
    scores = {}
    for task, indices in groups.items():
        hyps, refs = [outputs[i] for i in indices], [rows[i][2] for i in indices]
        scores[task] = {"lines": len(indices), "bleu": bleu(hyps, refs).score, "chrf": chrf(hyps, refs).score,
                        "exact": 100.0 * sum(h.strip() == r.strip() for h, r in zip(hyps, refs, strict=True)) / len(indices)}
    return scores, outputs
