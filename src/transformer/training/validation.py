"""Validation BLEU during training (§6.1 reports BLEU of the development set): greedy-decode a
fixed sample of the validation pairs and score the detokenised output with sacreBLEU
(evaluation.scoring.greedy_scores does the decoding and the scoring).

The sample is the same at every validation (evenly spaced over the validation file), so the
numbers form a curve. Sources are the encoded validation sources, without special tokens (the
training convention); references are the validation target lines as read from the file.
Greedy, not beam search: it is a progress signal, cheaper than the final evaluation.
"""

from __future__ import annotations

from ..config import RunConfig
from ..evaluation.scoring import greedy_scores
from ..model.transformer import EncoderDecoder, Model
from .corpora import TrainingData


def bleu_sample(n_valid: int, n_samples: int) -> list[int]:
    """Indices of the fixed validation sample: n_samples evenly spaced over n_valid (all when
    fewer)."""
    if n_samples >= n_valid:
        return list(range(n_valid))
    return [i * n_valid // n_samples for i in range(n_samples)]


def evaluate_bleu(model: Model, data: TrainingData, config: RunConfig) -> dict[str, float]:
    """{"valid_bleu": corpus BLEU 0-100, "valid_exact": share of outputs equal to their reference}
    of greedy output on the sample; {} when off (train.bleu_samples = 0) or not a translation
    run."""
    n = config.train.bleu_samples
    if (
        n == 0
        or not data.valid
        or not isinstance(model, EncoderDecoder)
        or data.valid[0].src is None
    ):
        return {}
    examples = [data.valid[i] for i in bleu_sample(len(data.valid), n)]
    d = config.decode
    score, exact = greedy_scores(
        model,
        [e.src for e in examples],
        [data.valid_references[e.line] for e in examples],
        data.target_tokenizer.decode,
        max_len_a=d.max_len_a,
        max_len_b=d.max_len_b,
        batch_tokens=config.train.batch_tokens,
    )
    return {"valid_bleu": score, "valid_exact": exact}
