"""Heads on an encoder's hidden states: BERT's masked-LM head, the pooled classifier, and the span
and sentence heads of extractive question answering.

Legend (model/__init__.py): B batch, L length, C d_model, V vocabulary.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..config import GATED_ACTIVATIONS
from .layers import activate, dropped


class MaskedLMHead(nn.Module):
    """BERT's masked-LM head: dense -> activation -> LayerNorm -> vocabulary projection (tied or
    not) + bias."""

    def __init__(self, d_model: int, vocab_size: int, activation: str, eps: float):
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)
        # a gated FFN's gate activation
        self.activation = GATED_ACTIVATIONS.get(activation, activation)
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.decoder = nn.Linear(d_model, vocab_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """(B, L, C) -> (B, L, V)."""
        h = activate(self.dense(hidden), self.activation)
        return self.decoder(self.norm(h))


def mean_pooled(hidden: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """(B, L, C), mask (B, L) True at real tokens (None = all real) -> the mean over real tokens
    (B, C)."""
    if mask is None:
        return hidden.mean(dim=1)
    weights = mask.to(hidden.dtype).unsqueeze(-1)  # (B, L, 1)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)


class PooledClassifier(nn.Module):
    """Pool the hidden states (the first token's, [CLS], or the mean over real tokens), then BERT's
    pooler (dense + tanh, optional) and a classifier (optional) on top."""

    def __init__(
        self,
        d_model: int,
        n_classes: int,
        dropout: float,
        pooling: str = "first",
        dense: bool = True,
    ):
        super().__init__()
        self.pooling = pooling
        self.dense = nn.Linear(d_model, d_model) if dense else None
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(d_model, n_classes) if n_classes else None

    def pool(self, hidden: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """(B, L, C), mask (B, L) True at real tokens (None = all real) -> (B, C)."""
        pooled = hidden[:, 0] if self.pooling == "first" else mean_pooled(hidden, mask)
        return torch.tanh(self.dense(pooled)) if self.dense is not None else pooled

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """(B, L, C) -> (B, n_classes) logits, or the pooled (B, C) when there is no classifier."""
        pooled = self.pool(hidden, mask)
        return pooled if self.classifier is None else self.classifier(dropped(self.dropout, pooled))


class SpanHead(nn.Module):
    """BERT's head for SQuAD (Devlin et al. 2019, §4.2): one linear map of each token's state to a
    start logit and an end logit; an answer is the span whose start and end logits sum highest."""

    def __init__(self, d_model: int):
        super().__init__()
        self.proj = nn.Linear(d_model, 2)

    def forward(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L, C) -> start logits (B, L), end logits (B, L)."""
        start, end = self.proj(hidden).unbind(-1)
        return start, end


class SentenceHead(nn.Module):
    """Answer-sentence selection by similarity: the cosine of a question's embedding with each
    sentence's (each the mean of its hidden states, as sentence-transformers pools), standardized
    over the context's sentences, times a learned scale plus a learned bias: a logit per sentence,
    whether it belongs to the answer. At its start (scale 1, bias 0) a sentence counts when it is
    closer to the question than the context's average sentence, the pretrained encoder's own
    judgement."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(()))
        self.bias = nn.Parameter(torch.zeros(()))

    def forward(self, questions: torch.Tensor, sentences: torch.Tensor) -> torch.Tensor:
        """Embeddings of Q questions (Q, C) and of one context's S sentences (S, C) -> (Q, S)."""
        sims = F.normalize(questions.float(), dim=-1) @ F.normalize(sentences.float(), dim=-1).T
        mean = sims.mean(dim=-1, keepdim=True)
        spread = sims.std(dim=-1, correction=0, keepdim=True).clamp(min=1e-4)
        return self.scale * (sims - mean) / spread + self.bias
