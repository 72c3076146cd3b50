"""qa_sentences: answer-sentence selection, extractive question answering whose answers are whole
sentences (data.sentences has the rule, model.heads.SentenceHead the head).

The questions of data.train_squad (each its first gold answer) are grouped by context. The encoder
embeds each sentence and each question alone ([CLS] text [SEP], rows of at most data.max_len
tokens; a context's sentences once for all its questions), the sentence head gives a logit per
(question, sentence) pair, and the loss is the binary cross entropy against "more than half of
the sentence lies in the answer"; a unit is a pair. Batches hold whole contexts, train.batch_tokens
tokens of them at most (one larger context alone), their sentences read in runs of similar length.

Validation, on the first train.valid_questions questions of data.valid_squad: the loss and, from
the same logits, each question's answer (the best run of sentences), scored with SQuAD's exact
match and F1 (evaluation.overlap); best/ by F1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ...config import RunConfig
from ...data.batching import batch_indices, pad_rows, to_device
from ...data.sentences import ContextRows, context_rows, selected, sentence_bounds
from ...data.squad import Question, read_squad
from ...data.text import DataError
from ...evaluation.overlap import squad_scores
from ...model.heads import mean_pooled
from .. import distributed as D
from .base import StepSums, autocast, typical_shape, validation_sums
from .encoder import EncoderObjective, encoder_model, init_dir, run_tokenizer

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
    """Which sentences of a context answer the question (data.train_squad)."""

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
        tok = run_tokenizer(config, run_dir, dist, say, resume)
        super().__init__(config, tok, init_dir(config, run_dir, resume))
        train = read_squad(d.train_squad)
        self.train_items = self._items(train, self._bounds(train))
        self.sizes = np.fromiter((c.tokens for c in self.train_items), np.int64)
        self.valid_questions: list[Question] = []
        if d.valid_squad:
            limit = config.train.valid_questions or None
            self.valid_questions = read_squad(d.valid_squad)[:limit]
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
                f"no sentence of {d.train_squad} lies mostly inside its answer: check the answers"
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
        return encoder_model(self.config, self.tokenizer, self.tokens, HEADS)

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
        threshold = self.config.decode.sentence_threshold
        answers = [
            selected(q.context, b, z, threshold)
            for q, b, z in zip(self.valid_questions, self.valid_bounds, logits, strict=True)
        ]
        golds = [[text for text, _ in q.answers] for q in self.valid_questions]
        scores = squad_scores([a.text for a in answers], golds)
        return {**result, "valid_exact_match": scores["exact_match"], "valid_f1": scores["f1"]}

    def describe(self, result):
        return (
            f"valid loss {result['valid_loss']:.4f}  exact match "
            f"{result['valid_exact_match']:.1f}  F1 {result['valid_f1']:.1f}"
        )
