"""qa: extractive question answering, BERT's fine-tuning for SQuAD (Devlin et al. 2019, §4.2).

Each question (data.squad.train, SQuAD's JSON; its first gold answer) is read with its context in
windows of decode.answer_window tokens that move decode.answer_stride context tokens at a time
(data.squad.make_windows): [CLS] question [SEP] context [SEP], token types 0 then 1 where the
model has them. The span head gives a start and an end logit per token; the loss of a window is
the mean of the cross entropies of the start and of the end over its positions (padding
excluded), the target being the answer's first and last token when the whole answer lies in the
window, else [CLS]. Units are windows.

Validation, on the first train.valid_questions questions of data.squad.valid: the loss over their
windows and, from the same logits, each question answered as data.squad.Best does (the best span
over its windows), scored with SQuAD's exact match and F1 (evaluation.overlap); best/ by F1.
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
from ...data.squad import Best, Question, Window, question_windows, read_squad
from ...data.text import DataError
from ...evaluation.overlap import squad_scores
from .. import distributed as D
from .base import StepSums, autocast, validation_sums
from .encoder import EncoderObjective, TextRows, encoder_model, init_dir, run_tokenizer


def describe_answers(result: dict) -> str:
    """A question-answering validation in one line: loss, exact match and F1."""
    return (
        f"valid loss {result['valid_loss']:.4f}  exact match "
        f"{result['valid_exact_match']:.1f}  F1 {result['valid_f1']:.1f}"
    )


HEADS = dict(span_head=True, mlm_head=False, pooler=False, n_classes=0)


@dataclass
class SpanBatch:
    """Windows, right-padded: ids, mask and token types (B, L); target positions (B,) each."""

    ids: torch.Tensor
    mask: torch.Tensor
    types: torch.Tensor
    starts: torch.Tensor
    ends: torch.Tensor
    units: int
    tokens: int
    rows: list[int]
    """The windows' numbers (validation reads their answers from the logits)."""

    def to(self, device) -> SpanBatch:
        return SpanBatch(
            *(to_device(t, device) for t in (self.ids, self.mask, self.types)),
            to_device(self.starts, device),
            to_device(self.ends, device),
            self.units,
            self.tokens,
            self.rows,
        )


class SpanQA(TextRows, EncoderObjective):
    """Start and end of the answer span in a context (data.squad.train)."""

    name = "qa"
    best_key, higher_is_better = "valid_f1", True

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        dist: D.DistInfo,
        say: Callable[[str], None],
        resume: bool,
    ):
        d, s = config.data, config.decode
        tok = run_tokenizer(config, run_dir, dist, say, resume)
        super().__init__(config, tok, init_dir(config, run_dir, resume))
        train = read_squad(d.squad.train)
        self.train_rows = self._windows(train)
        self.sizes = np.fromiter((len(r.ids) for r in self.train_rows), np.int64)
        self.valid_questions: list[Question] = []
        if d.squad.valid:
            limit = config.train.valid_questions or None
            self.valid_questions = read_squad(d.squad.valid)[:limit]
        self.valid_rows = self._windows(self.valid_questions)
        held = sum(r.start > 0 for r in self.train_rows)
        say(
            f"data: {len(train):,} training "
            f"questions in {len(self.train_rows):,} windows of at most {s.answer_window} tokens "
            f"({held:,} hold their whole answer; the rest point at [CLS]), "
            f"{len(self.valid_questions):,} validation questions in {len(self.valid_rows):,}"
        )
        if not held:
            raise DataError(
                f"no window of {d.squad.train} holds a whole answer: raise decode.answer_window "
                "or check the answers"
            )

    def _windows(self, questions: list[Question]) -> list[Window]:
        s = self.config.decode
        pairs = [(q.question, q.context) for q in questions]
        answers = [(q.answers[0][1], q.answers[0][1] + len(q.answers[0][0])) for q in questions]
        return question_windows(
            self.tokenizer, self.tokens, pairs, s.answer_window, s.answer_stride, answers
        )

    def collate(self, indices, key=None, rows=None):
        rows = self.train_rows if rows is None else rows
        chosen = [rows[i] for i in indices]
        ids, mask = pad_rows([r.ids for r in chosen], self.tokens.pad)  # (B, L) each
        types = pad_rows([r.types for r in chosen], 0)[0]  # (B, L)
        starts = torch.tensor([r.start for r in chosen])
        ends = torch.tensor([r.end for r in chosen])
        return SpanBatch(
            ids, mask, types, starts, ends, len(chosen), int(mask.sum()), list(indices)
        )

    @property
    def has_valid(self):
        return bool(self.valid_rows)

    def new_model(self):
        return encoder_model(self.config, self.tokenizer, self.tokens, HEADS)

    def loss(self, net, model, batch, device):
        types = batch.types if model.config.n_token_types else None
        with autocast(device, self.config.train.precision):
            hidden = net(batch.ids, attention_mask=batch.mask, token_type_ids=types)  # (B, L, C)
            start, end = model.span_head(hidden)  # (B, L) each
        padding = ~batch.mask
        start = start.float().masked_fill(padding, float("-inf"))
        end = end.float().masked_fill(padding, float("-inf"))
        nll = (
            F.cross_entropy(start, batch.starts, reduction="sum")
            + F.cross_entropy(end, batch.ends, reduction="sum")
        ) / 2
        # validation reads its answers off these; a training step has no use for them
        logits = None if model.training else torch.stack([start, end], dim=-1).detach()  # (B, L, 2)
        return StepSums(nll, nll.detach(), batch.units, batch.tokens, logits)

    def valid_batches(self):
        sizes = [len(r.ids) for r in self.valid_rows]
        for indices in batch_indices(sizes, self.config.train.batch_tokens, 0, 0, shuffle=False):
            yield self.collate(indices, rows=self.valid_rows)

    def validate(self, model, device):
        """Loss, exact match and F1 in one pass: the answers are read off the loss's logits."""
        best = Best([q.context for q in self.valid_questions], self.config.decode.max_answer_tokens)

        def observe(batch: SpanBatch, out: StepSums) -> None:
            logits = out.logits.cpu()
            for j, number in enumerate(batch.rows):
                best.see(self.valid_rows[number], logits[j, :, 0], logits[j, :, 1])

        result = validation_sums(self, model, device, self.valid_batches(), observe)
        golds = [[text for text, _ in q.answers] for q in self.valid_questions]
        scores = squad_scores([a.text for a in best.answers()], golds)
        return {**result, "valid_exact_match": scores["exact_match"], "valid_f1": scores["f1"]}

    def describe(self, result):
        return describe_answers(result)
