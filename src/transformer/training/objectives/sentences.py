"""qa_sentences: answer-sentence selection, extractive question answering whose answers are whole
sentences (data.sentences has the rule).

Each question of data.train_squad (its first gold answer) is read with each sentence of its
context, [CLS] question [SEP] sentence [SEP], rows of at most data.max_len tokens; the model's
sentence head gives one logit a row and the loss is the binary cross entropy against "more than
half of the sentence lies in the answer". Units are rows.

Validation, on the first train.valid_questions questions of data.valid_squad: the loss over their
rows and, from the same logits, each question's answer (the best run of sentences), scored with
SQuAD's exact match and F1 (evaluation.overlap); best/ by F1.
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
from ...data.sentences import SentenceRow, selected, sentence_bounds, sentence_rows
from ...data.squad import Question, read_squad
from ...data.text import DataError
from ...evaluation.overlap import squad_scores
from .. import distributed as D
from .base import StepSums, autocast, validation_sums
from .encoder import EncoderObjective, TextRows, encoder_model, init_dir, run_tokenizer

HEADS = dict(sentence_head=True, span_head=False, mlm_head=False, n_classes=0)


@dataclass
class SentenceBatch:
    """Rows, right-padded: ids, mask and token types (B, L); targets (B,)."""

    ids: torch.Tensor
    mask: torch.Tensor
    types: torch.Tensor
    labels: torch.Tensor
    units: int
    tokens: int
    rows: list[int]
    """The rows' numbers (validation reads their answers from the logits)."""

    def to(self, device) -> SentenceBatch:
        return SentenceBatch(
            *(to_device(t, device) for t in (self.ids, self.mask, self.types, self.labels)),
            self.units,
            self.tokens,
            self.rows,
        )


class SentenceQA(TextRows, EncoderObjective):
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
        self.train_rows = self._rows(train)
        self.sizes = np.fromiter((len(r.ids) for r in self.train_rows), np.int64)
        self.valid_questions: list[Question] = []
        if d.valid_squad:
            limit = config.train.valid_questions or None
            self.valid_questions = read_squad(d.valid_squad)[:limit]
        self.valid_bounds = [
            sentence_bounds(q.context, q.verse_starts) for q in self.valid_questions
        ]
        self.valid_rows = self._rows(self.valid_questions, self.valid_bounds)
        inside = sum(r.label > 0 for r in self.train_rows)
        say(
            f"data: {len(train):,} training questions in {len(self.train_rows):,} (question, "
            f"sentence) rows ({inside:,} in an answer), {len(self.valid_questions):,} validation "
            f"questions in {len(self.valid_rows):,}"
        )
        if not inside:
            raise DataError(
                f"no sentence of {d.train_squad} lies mostly inside its answer: check the answers"
            )

    def _rows(self, questions: list[Question], bounds=None) -> list[SentenceRow]:
        if bounds is None:
            bounds = [sentence_bounds(q.context, q.verse_starts) for q in questions]
        answers = [(q.answers[0][1], q.answers[0][1] + len(q.answers[0][0])) for q in questions]
        return sentence_rows(
            self.tokenizer,
            self.tokens,
            [q.question for q in questions],
            bounds,
            [q.context for q in questions],
            self.config.data.max_len,
            answers,
        )

    def collate(self, indices, key=None, rows=None):
        rows = self.train_rows if rows is None else rows
        chosen = [rows[i] for i in indices]
        ids, mask = pad_rows([r.ids for r in chosen], self.tokens.pad)  # (B, L) each
        types = pad_rows([r.types for r in chosen], 0)[0]  # (B, L)
        labels = torch.tensor([r.label for r in chosen])
        return SentenceBatch(ids, mask, types, labels, len(chosen), int(mask.sum()), list(indices))

    @property
    def has_valid(self):
        return bool(self.valid_rows)

    def new_model(self):
        return encoder_model(self.config, self.tokenizer, self.tokens, HEADS)

    def loss(self, net, model, batch, device):
        types = batch.types if model.config.n_token_types else None
        with autocast(device, self.config.train.precision):
            hidden = net(batch.ids, attention_mask=batch.mask, token_type_ids=types)  # (B, L, C)
            logits = model.pooler(hidden, batch.mask)[:, 0]  # (B,)
        logits = logits.float()
        nll = F.binary_cross_entropy_with_logits(logits, batch.labels, reduction="sum")
        # validation reads its answers off these; a training step has no use for them
        kept = None if model.training else logits.detach()
        return StepSums(nll, nll.detach(), batch.units, batch.tokens, kept)

    def valid_batches(self):
        sizes = [len(r.ids) for r in self.valid_rows]
        for indices in batch_indices(sizes, self.config.train.batch_tokens, 0, 0, shuffle=False):
            yield self.collate(indices, rows=self.valid_rows)

    def validate(self, model, device):
        """Loss, exact match and F1 in one pass: the answers are read off the loss's logits."""
        logits = [[0.0] * len(b) for b in self.valid_bounds]

        def observe(batch: SentenceBatch, out: StepSums) -> None:
            for number, value in zip(batch.rows, out.logits.cpu().tolist(), strict=True):
                row = self.valid_rows[number]
                logits[row.question][row.sentence] = value

        result = validation_sums(self, model, device, self.valid_batches(), observe)
        answers = [
            selected(q.context, b, z)
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
