"""Validation BLEU during training (§6.1 reports BLEU of the development set): greedy-decode a
fixed sample of the validation pairs and score the detokenised output with sacreBLEU.

The sample is the same at every validation (evenly spaced over the validation file), so the
numbers form a curve. Sources are the encoded validation sources, without special tokens (the
training convention); references are the validation target lines as read from the file.
Greedy, not beam search: it is a progress signal, cheaper than the final evaluation.
"""

from __future__ import annotations

import torch

from ..config import RunConfig
from ..decoding.greedy import greedy_search
from ..evaluation.metrics import bleu
from ..model.transformer import EncoderDecoder, Model
from .corpora import TrainingData


def bleu_sample(n_valid: int, n_samples: int) -> list[int]:
    """Indices of the fixed validation sample: n_samples evenly spaced over n_valid (all when fewer)."""
    if n_samples >= n_valid:
        return list(range(n_valid))
    return [i * n_valid // n_samples for i in range(n_samples)]


@torch.no_grad()
def evaluate_bleu(model: Model, data: TrainingData, config: RunConfig) -> dict[str, float]:
    """{"valid_bleu": corpus BLEU 0-100, "valid_exact": share of outputs equal to their reference}
    of greedy output on the sample; {} when off (train.bleu_samples = 0) or not a translation run."""
    n = config.train.bleu_samples
    if n == 0 or not data.valid or not isinstance(model, EncoderDecoder) or data.valid[0].src is None:
        return {}
    examples = [data.valid[i] for i in bleu_sample(len(data.valid), n)]
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].src))  # similar lengths batch together
    hypotheses = [""] * len(examples)
    d = config.decode
    rows = max(1, config.train.batch_tokens // max(len(examples[order[-1]].src), 1))
    for start in range(0, len(order), rows):
        batch = order[start: start + rows]
        ids = greedy_search(model, [examples[i].src for i in batch], max_len_a=d.max_len_a, max_len_b=d.max_len_b)  # (B, T), no <s>/</s>
        for i, row in zip(batch, ids.tolist(), strict=True):
            hypotheses[i] = data.target_tokenizer.decode(row).strip()
    references = [data.valid_references[e.line] for e in examples]
    exact = sum(h == r.strip() for h, r in zip(hypotheses, references, strict=True)) / len(examples)
    return {"valid_bleu": bleu(hypotheses, references).score, "valid_exact": exact}
