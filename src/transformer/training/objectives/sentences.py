"""qa_sentences: answer-sentence selection, extractive question answering whose answers are whole
sentences (data.sentences has the rule, model.heads.SentenceHead the head).

The questions of data.squad.train (each its first gold answer) are grouped by context. The encoder
embeds each sentence and each question alone ([CLS] text [SEP], rows of at most data.max_len
tokens; a context's sentences once for all its questions), the sentence head gives a logit per
(question, sentence) pair, and the loss is the binary cross entropy against "more than half of
the sentence lies in the answer"; a unit is a pair. Batches hold whole contexts, train.batch_tokens
tokens of them at most (one larger context alone), their sentences read in runs of similar length.

Validation, on the first train.valid_questions questions of data.squad.valid: the loss and, from
the same logits, each question's answer (the best run of sentences) at each of THRESHOLDS, scored
with SQuAD's exact match and F1 (evaluation.overlap); the F1-best threshold is the one reported
and saved as the model's decode.sentence_threshold; best/ by that F1.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ...config import RunConfig
from ...data.batching import batch_indices, pad_rows, to_device
from ...data.sentences import ContextRows, context_rows, embedded, selected, sentence_bounds
from ...data.squad import Question, read_squad
from ...data.text import DataError
from ...evaluation.overlap import squad_scores
from ...model.heads import mean_pooled
from .. import distributed as D
from .base import StepSums, autocast, typical_shape, validation_sums
from .encoder import EncoderObjective, encoder_model, init_dir, run_tokenizer
from .qa import describe_answers

HEADS = dict(sentence_head=True, span_head=False, mlm_head=False, n_classes=0, pooler=False)


LENGTH_SPREAD = 1.25
"""A batch's rows are read in runs of similar length: a run ends before a row this many times
longer than the run's first (verses run from 5 to 130 tokens; one padded block would be half
padding)."""


def length_runs(rows: list[list[int]], pad: int) -> tuple[list[tuple], torch.Tensor]:
    """Rows -> their padded (ids, mask) blocks, shortest rows first, each block holding rows of
    similar length (LENGTH_SPREAD), and the permutation (N,) that puts the blocks' rows, stacked,
    back in the rows' order."""
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    blocks, run = [], []
    for i in order:
        if run and len(rows[i]) > LENGTH_SPREAD * len(rows[run[0]]):
            blocks.append(pad_rows([rows[j] for j in run], pad))
            run = []
        run.append(i)
    if run:
        blocks.append(pad_rows([rows[j] for j in run], pad))
    restore = torch.empty(len(rows), dtype=torch.long)
    restore[torch.tensor(order, dtype=torch.long)] = torch.arange(len(rows))
    return blocks, restore


THRESHOLDS = tuple(round(0.05 * k, 2) for k in range(1, 20))
"""The sentence thresholds validation tries (0.05 to 0.95): the F1-best is saved in the model's
decode.json (a calibrated head puts the best near the share of sentences in answers, not at
0.5)."""

FIT_SENTENCES = 4000
"""fit_head reads contexts spread evenly over the training data, this many sentences of them."""


def fit_head(model, items: list[ContextRows], pad: int, say: Callable[[str], None]) -> None:
    """Fit the new sentence head's scale and bias to the encoder as it is: a logistic regression
    (Newton's method) of the targets on the head's standardized cosines, over contexts spread
    evenly over the training data (FIT_SENTENCES sentences), before any weight of the encoder
    moves. A fresh head at scale 1 and bias 0 is far from the base rate (28% of commentary-qa's
    verses are in an answer), and at the encoder's learning rate its two numbers move ~1e-4 a
    step, so for hundreds of steps its errors pull the embeddings about instead (fitting the head
    first, then fine-tuning all of it: Kumar et al. 2022, "LP-FT")."""
    every = max(1, round(sum(len(c.sentences) for c in items) / FIT_SENTENCES))
    chosen = items[::every]
    head, was_training = model.sentence_head, model.training
    model.eval()  # no dropout: the encoder as it will answer
    with torch.no_grad():
        head.scale.fill_(1.0)
        head.bias.fill_(0.0)
        sentences = embedded(
            [r for c in chosen for r in c.sentences], pad, 8192, model.sentence_embeddings
        )
        questions = embedded(
            [r for c in chosen for r in c.questions], pad, 8192, model.sentence_embeddings
        )
        z, y, s, q = [], [], 0, 0
        for c in chosen:
            width, n = len(c.sentences), len(c.questions)
            z.append(head(questions[q : q + n], sentences[s : s + width]).flatten())
            y += [value for row in c.labels for value in row]
            s, q = s + width, q + n
    x = torch.stack([torch.cat(z).double(), torch.ones(len(y), dtype=torch.float64)], dim=1)
    target = torch.tensor(y, dtype=torch.float64)
    w = torch.zeros(2, dtype=torch.float64)
    ridge = 1e-4  # keeps the fit finite where the untrained cosines already separate the targets
    for _ in range(50):
        p = torch.sigmoid(x @ w)
        hessian = x.T @ (x * (p * (1 - p))[:, None]) + ridge * torch.eye(2, dtype=torch.float64)
        step = torch.linalg.solve(hessian, x.T @ (p - target) + ridge * w)
        w -= step
        if float(step.abs().max()) < 1e-9:
            break
    before = F.binary_cross_entropy_with_logits(x[:, 0], target)
    after = F.binary_cross_entropy_with_logits(x @ w, target)
    with torch.no_grad():
        head.scale.fill_(float(w[0]))
        head.bias.fill_(float(w[1]))
    model.train(was_training)
    say(
        f"sentence head fitted to the untrained embeddings ({len(y):,} pairs of {len(chosen)} "
        f"contexts): scale {float(w[0]):.3f}, bias {float(w[1]):.3f}, loss {float(before):.4f} -> "
        f"{float(after):.4f}"
    )


@dataclass
class ContextBatch:
    """Whole contexts: their sentences' rows in blocks of similar length (ids, mask) with the
    permutation back to the rows' order, and their questions' rows (Q, L) right-padded with their
    mask; groups: per context, its (first question, end, first sentence, end) in the rows; labels:
    each context's (questions, sentences) targets, flattened in that order."""

    blocks: list[tuple[torch.Tensor, torch.Tensor]]
    restore: torch.Tensor
    questions: torch.Tensor
    question_mask: torch.Tensor
    groups: list[tuple[int, int, int, int]]
    labels: torch.Tensor
    units: int
    tokens: int
    items: list[int]
    """The contexts' numbers (validation reads their answers from the logits)."""

    def to(self, device) -> ContextBatch:
        return ContextBatch(
            [(to_device(ids, device), to_device(mask, device)) for ids, mask in self.blocks],
            to_device(self.restore, device),
            to_device(self.questions, device),
            to_device(self.question_mask, device),
            self.groups,
            to_device(self.labels, device),
            self.units,
            self.tokens,
            self.items,
        )


class SentenceQA(EncoderObjective):
    """Which sentences of a context answer the question (data.squad.train)."""

    name = "qa_sentences"
    best_key, higher_is_better = "valid_f1", True

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        dist: D.DistInfo,
        say: Callable[[str], None],
        resume: bool,
    ):
        d = config.data
        self.resume, self.say = resume, say
        self.threshold = config.decode.sentence_threshold  # until a validation chooses one
        tok = run_tokenizer(config, run_dir, dist, say, resume)
        super().__init__(config, tok, init_dir(config, run_dir, resume))
        train = read_squad(d.squad.train)
        self.train_items = self._items(train, self._bounds(train))
        self.sizes = np.fromiter((c.tokens for c in self.train_items), np.int64)
        self.valid_questions: list[Question] = []
        if d.squad.valid:
            limit = config.train.valid_questions or None
            self.valid_questions = read_squad(d.squad.valid)[:limit]
        self.valid_bounds = self._bounds(self.valid_questions)
        self.valid_items = self._items(self.valid_questions, self.valid_bounds)
        rows = sum(len(c.sentences) * len(c.questions) for c in self.train_items)
        inside = sum(sum(map(sum, c.labels)) for c in self.train_items)
        say(
            f"data: {len(train):,} training questions on {len(self.train_items):,} contexts, "
            f"{rows:,} (question, sentence) pairs ({int(inside):,} in an answer), "
            f"{len(self.valid_questions):,} validation questions on {len(self.valid_items):,}"
        )
        if not inside:
            raise DataError(
                f"no sentence of {d.squad.train} lies mostly inside its answer: check the answers"
            )

    @staticmethod
    def _bounds(questions: list[Question]) -> list[list[tuple[int, int]]]:
        return [sentence_bounds(q.context, q.verse_starts) for q in questions]

    def _items(self, questions: list[Question], bounds) -> list[ContextRows]:
        answers = [(q.answers[0][1], q.answers[0][1] + len(q.answers[0][0])) for q in questions]
        return context_rows(
            self.tokenizer,
            self.tokens,
            [q.question for q in questions],
            bounds,
            [q.context for q in questions],
            self.config.data.max_len,
            answers,
        )

    def batches(self, epoch):
        return batch_indices(
            self.sizes, self.config.train.batch_tokens, self.config.train.seed, epoch
        )

    def units(self, indices, key):
        return sum(
            len(self.train_items[i].questions) * len(self.train_items[i].sentences) for i in indices
        )

    def padding_share(self, batches):
        """Padded positions among all: a batch pads its sentences within runs of similar length
        (length_runs), and its questions to the longest."""
        real = padded = 0
        for indices in batches:
            sentences = [r for i in indices for r in self.train_items[i].sentences]
            questions = [r for i in indices for r in self.train_items[i].questions]
            blocks = length_runs(sentences, self.tokens.pad)[0]
            real += sum(map(len, sentences)) + sum(map(len, questions))
            padded += sum(ids.numel() for ids, _ in blocks) + len(questions) * max(
                map(len, questions)
            )
        return 1 - real / padded if padded else 0.0

    def attention_shape(self) -> tuple[int, int]:
        """The encoder reads sentences and questions, not whole contexts: the typical batch of
        sentence rows."""
        lengths = [len(r) for c in self.train_items for r in c.sentences]
        return typical_shape(lengths, self.config.train.batch_tokens)

    def collate(self, indices, key=None, items=None):
        items = self.train_items if items is None else items
        chosen = [items[i] for i in indices]
        sentences, questions, groups, labels = [], [], [], []
        for c in chosen:
            groups.append(
                (
                    len(questions),
                    len(questions) + len(c.questions),
                    len(sentences),
                    len(sentences) + len(c.sentences),
                )
            )
            sentences += c.sentences
            questions += c.questions
            labels += [value for row in c.labels for value in row]
        blocks, restore = length_runs(sentences, self.tokens.pad)
        q_ids, q_mask = pad_rows(questions, self.tokens.pad)  # (Q, L) each
        tokens = sum(map(len, sentences)) + sum(map(len, questions))
        return ContextBatch(
            blocks,
            restore,
            q_ids,
            q_mask,
            groups,
            torch.tensor(labels),
            len(labels),
            tokens,
            list(indices),
        )

    @property
    def has_valid(self):
        return bool(self.valid_items)

    def new_model(self):
        """The encoder under a sentence head fitted to its untrained embeddings (fit_head); a
        resumed run's head comes from its checkpoint."""
        model = encoder_model(self.config, self.tokenizer, self.tokens, HEADS)
        if not self.resume:
            fit_head(model, self.train_items, self.tokens.pad, self.say)
        return model

    def loss(self, net, model, batch, device):
        with autocast(device, self.config.train.precision):
            parts = [mean_pooled(net(ids, attention_mask=mask), mask) for ids, mask in batch.blocks]
            sentences = torch.cat(parts)[batch.restore]  # (S, C), the rows' order
            questions = mean_pooled(
                net(batch.questions, attention_mask=batch.question_mask), batch.question_mask
            )  # (Q, C)
        logits = torch.cat(
            [
                model.sentence_head(questions[qa:qb], sentences[sa:sb]).flatten()
                for qa, qb, sa, sb in batch.groups
            ]
        ).float()
        nll = F.binary_cross_entropy_with_logits(logits, batch.labels, reduction="sum")
        # validation reads its answers off these; a training step has no use for them
        kept = None if model.training else logits.detach()
        return StepSums(nll, nll.detach(), batch.units, batch.tokens, kept)

    def valid_batches(self):
        sizes = [c.tokens for c in self.valid_items]
        for indices in batch_indices(sizes, self.config.train.batch_tokens, 0, 0, shuffle=False):
            yield self.collate(indices, items=self.valid_items)

    def validate(self, model, device):
        """Loss, exact match and F1 in one pass: the answers are read off the loss's logits."""
        logits: list[list[float]] = [[] for _ in self.valid_questions]

        def observe(batch: ContextBatch, out: StepSums) -> None:
            values = out.logits.cpu().tolist()
            for number in batch.items:
                item = self.valid_items[number]
                width = len(item.sentences)
                for q in item.numbers:
                    logits[q], values = values[:width], values[width:]

        result = validation_sums(self, model, device, self.valid_batches(), observe)
        golds = [[text for text, _ in q.answers] for q in self.valid_questions]
        best = None
        for threshold in THRESHOLDS:
            answers = [
                selected(q.context, b, z, threshold)
                for q, b, z in zip(self.valid_questions, self.valid_bounds, logits, strict=True)
            ]
            scores = squad_scores([a.text for a in answers], golds)
            if best is None or scores["f1"] > best[1]["f1"]:
                best = (threshold, scores)
        self.threshold = best[0]
        return {
            **result,
            "valid_exact_match": best[1]["exact_match"],
            "valid_f1": best[1]["f1"],
            "valid_threshold": best[0],
        }

    def save_files(self):
        """The model's files, its decode.json holding the threshold the last validation chose."""
        files = super().save_files()
        decode = files["decode"]
        files["decode"] = dataclasses.replace(decode, sentence_threshold=self.threshold)
        return files

    def describe(self, result):
        return f"{describe_answers(result)} (sentence threshold {result['valid_threshold']:.2f})"
