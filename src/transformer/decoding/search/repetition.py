"""Guards against repetition loops ("the gate of the gate of the gate"), as pure functions.

Legend (model/__init__.py): B rows (sentences, or beam hypotheses), T tokens output so far, V
vocabulary; spelled out: grams (the T - n + 1 n-grams of a row's output).

The rules:
- History: a row's own output tokens so far, and only those: not the source, not the prompt of a
  language model, not the start token <s>. (Hugging Face counts the whole decoder input: the start
  token, and for a decoder-only model the prompt too; fairseq counts its start token. Outputs
  differ only where the start token is output again, or, for a language model, where the prompt
  matters: we let a continuation reuse the prompt's words, names and terms, as it must.) Beam
  search keeps one history per hypothesis, and it follows the hypothesis when beams are reordered
  (Stepper.reorder moves it with the cache's rows).
- no_repeat_ngram_size n (fairseq, CTranslate2, Hugging Face's `no_repeat_ngram_size`): a token
  that would complete an n-gram the history already holds gets log-probability -inf. It is set on
  the log-probabilities, after log_softmax, as fairseq and Hugging Face's beam search do: the
  other tokens keep the model's log-probabilities (not renormalised), so scores stay log P(Y | X).
  n = 1 blocks every token already output. 0 = off.
- repetition_penalty p (CTRL, Keskar et al. 2019, "penalized sampling", in the sign-aware form
  of CTranslate2's and Hugging Face's `repetition_penalty`): the logit of every token the history
  holds (once per token, however often it occurs) is divided by p when positive, multiplied by p
  when negative; then log_softmax. p > 1 discourages repeats, p < 1 encourages them; 1 = off.
  It is applied to the logits before log_softmax in every search (CTranslate2; Hugging Face's
  greedy search and sampling), so scores are those of the penalised distribution. Hugging Face's
  beam search departs from this: it penalises the log-probabilities after log_softmax (not
  renormalised), which ranks beams differently.
- Padding: a history entry equal to V (the vocabulary size) is no token; both guards skip it. A
  running batch (lanes.py) left-pads the histories of rows that joined it later with it.
- Off (0 and 1, the defaults) costs nothing: the Stepper keeps no history and its step is the
  same code as without the guards.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def penalize_repetitions(
    logits: torch.Tensor, history: torch.Tensor, penalty: float
) -> torch.Tensor:
    """CTRL's repetition penalty (module rules): logits (B, V) with each token of history (B, T)
    divided by penalty if positive, else multiplied by it (entries V are padding). Returns a new
    tensor."""
    if penalty == 1.0 or history.shape[1] == 0:
        return logits
    vocab = logits.shape[1]
    wide = torch.nn.functional.pad(logits, (0, 1))  # column V: where padding (id V) points
    seen = wide.gather(1, history)  # (B, T); a repeated token gathers the same logit twice
    seen = torch.where(seen < 0, seen * penalty, seen / penalty)
    return wide.scatter(1, history, seen)[:, :vocab]  # duplicates write equal values


def block_repeated_ngrams(log_probs: torch.Tensor, history: torch.Tensor, n: int) -> torch.Tensor:
    """Set to -inf the tokens that would complete an n-gram already in each row's history (module
    rules): log_probs (B, V), history (B, T). In place; returns it."""
    rows, length = history.shape
    if n <= 0 or length < n:  # no complete n-gram yet
        return log_probs
    vocab = log_probs.shape[1]
    grams = history.unfold(1, n, 1)  # (B, grams, n): every n-gram of the output, in order
    tail = history[:, length - n + 1 :]  # (B, n - 1): the tokens a next token would extend
    match = (grams[:, :, :-1] == tail[:, None, :]).all(dim=2)  # (B, grams)
    # The last token of each matching n-gram is blocked; the others point at a spare column V.
    blocked = torch.where(match, grams[:, :, -1], vocab)  # (B, grams)
    mask = torch.zeros(rows, vocab + 1, dtype=torch.bool, device=log_probs.device)
    mask.scatter_(1, blocked, True)
    return log_probs.masked_fill_(mask[:, :vocab], -float("inf"))


@dataclass(frozen=True)
class RepetitionGuards:
    """no_repeat_ngram_size and repetition_penalty (module rules), as the Stepper applies them."""

    no_repeat_ngram_size: int = 0
    repetition_penalty: float = 1.0

    @classmethod
    def of(cls, no_repeat_ngram_size: int, repetition_penalty: float) -> RepetitionGuards | None:
        """The guards, or None when both are off (the Stepper then does nothing more)."""
        if no_repeat_ngram_size == 0 and repetition_penalty == 1.0:
            return None
        return cls(no_repeat_ngram_size, repetition_penalty)

    def log_probs(self, logits: torch.Tensor, history: torch.Tensor) -> torch.Tensor:
        """Next-token log-probabilities (B, V) in float32 from logits (B, V) and the rows' output so
        far (B, T)."""
        logits = penalize_repetitions(logits.float(), history, self.repetition_penalty)
        log_probs = torch.log_softmax(logits, dim=-1)
        return block_repeated_ngrams(log_probs, history, self.no_repeat_ngram_size)
