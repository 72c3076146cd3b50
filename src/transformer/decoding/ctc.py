"""A speech model's CTC head in transcription (Graves et al. 2006).

- "ctc" (best_path, ctc_transcribe): each encoder position's most probable token, repeats merged
  and blanks dropped. No decoder runs and no search is needed; it cannot loop or run past the
  audio, and it costs one encoder pass.
- "joint" (joint_search): the beam search of Watanabe et al. 2017 (ESPnet's): each hypothesis is
  scored (1 - ctc_weight) x the decoder's log-probability + ctc_weight x CTC's prefix score
  (PrefixScorer: the log-probability that the transcript starts with it; of the transcript being
  exactly it, when it ends). The decoder proposes each step's candidates (its PRE_BEAM most probable
  tokens, or int(1.5 x beam) when more, as ESPnet's pre-beam: every character of a character
  vocabulary), CTC vetoes those the audio does not hold: the decoder
  cannot run on with a likely sentence the clip does not say, or stop early. The search ends when
  no live hypothesis scores above the best ended one (scores only fall as tokens are added), or at
  the length bound; no length penalty. Each clip is searched on its own.

The rules: the blank is the padding id (as in training: training.objectives.speech), and neither it
nor the decoder's prompt is ever output; positions past a clip's end (the frame mask) are not
read; the result is a list of token ids per clip, in batch order. decode.speech_head chooses
(transcribe, evaluate --audio; a training run's validation uses the best path for "ctc" and greedy
decoding otherwise).
"""

from __future__ import annotations

import torch

from .search.step import inference

PRE_BEAM = 32
"""The joint search scores at least this many of the decoder's most probable tokens each step."""


class CTCError(ValueError):
    """The model cannot transcribe with a CTC head; the message says what to do."""


def best_path(logits: torch.Tensor, lengths: torch.Tensor | None, blank: int) -> list[list[int]]:
    """(B, L, V) CTC logits and each row's real positions (B,) or None -> the best path's tokens
    per row: argmax at each position, consecutive repeats merged, blanks dropped."""
    best = logits.argmax(-1)  # (B, L)
    rows = []
    for row in range(best.shape[0]):
        path = best[row, : int(lengths[row])] if lengths is not None else best[row]
        keep = torch.ones_like(path, dtype=torch.bool)
        keep[1:] = path[1:] != path[:-1]
        rows.append([t for t in path[keep].tolist() if t != blank])
    return rows


def ctc_transcribe(
    model: torch.nn.Module, features: torch.Tensor, mask: torch.Tensor | None
) -> list[list[int]]:
    """Log-mel features (B, n_mels, F) and their frame mask (B, F) or None -> each clip's tokens by
    the CTC head's best path."""
    _, logits, positions = encode_with_ctc(model, features, mask)
    lengths = None if positions is None else positions.sum(-1)
    return best_path(logits, lengths, model.config.pad_id)


def encode_with_ctc(model: torch.nn.Module, features: torch.Tensor, mask: torch.Tensor | None):
    """The encoder's memory (B, L, C), the CTC head's logits over it (B, L, V, float32) and the
    positions' mask (B, L) or None, in inference mode; a model without a CTC head is refused."""
    if getattr(model, "ctc_head", None) is None:
        raise CTCError(
            "this model has no CTC head: use the decoder (speech_head = decoder), or train one "
            "with model.audio.ctc = true"
        )
    device = next(model.parameters()).device
    with inference(model):
        memory, positions = model.encode(
            features.to(device), None if mask is None else mask.to(device)
        )
        logits = model.ctc_head(memory.to(model.ctc_head.weight.dtype)).float()
    return memory, logits, positions


# ---- joint CTC / attention beam search (Watanabe et al. 2017; ESPnet's) ----


def _logadd(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.logaddexp(a, b)


class PrefixScorer:
    """CTC's prefix scores of one clip (Watanabe et al. 2017, Algorithm 2): for a prefix g, the
    log-probabilities r[t, 0] / r[t, 1] that the first t + 1 positions read g ending in a token /
    in a blank; the prefix score psi(h) of h = g + c is the log-probability that the clip's
    transcript starts with h, and psi of g ending here is log P(transcript = g)."""

    def __init__(self, log_probs: torch.Tensor, blank: int):
        self.x = log_probs  # (T, V)
        self.blank = blank
        self.length = log_probs.shape[0]

    def initial(self) -> torch.Tensor:
        """r of the empty prefix (T, 2): only blanks so far."""
        r = torch.full((self.length, 2), float("-inf"), dtype=self.x.dtype, device=self.x.device)
        r[:, 1] = torch.cumsum(self.x[:, self.blank], dim=0)
        return r

    def extend(
        self, r: torch.Tensor, last: torch.Tensor, empty: torch.Tensor, candidates: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """N prefixes' r (N, T, 2), their last tokens (N,) (any value when empty), whether each is
        empty (N,) and K candidate tokens each (N, K) -> the extended prefixes' r (N, K, T, 2) and
        prefix scores psi (N, K)."""
        x = self.x[:, candidates].permute(1, 2, 0)  # (N, K, T): each candidate's log-probs
        n, k = candidates.shape
        phi = _logadd(r[:, :, 0], r[:, :, 1])[:, None, :].expand(n, k, -1).clone()  # (N, K, T)
        same = candidates == last[:, None]  # (N, K): c repeats g's last token
        phi[same] = r[:, :, 1][:, None, :].expand(n, k, -1)[same]  # only through a blank
        new = torch.full((n, k, self.length, 2), float("-inf"), dtype=x.dtype, device=x.device)
        start = torch.where(empty[:, None], x[:, :, 0], torch.full_like(x[:, :, 0], float("-inf")))
        new[:, :, 0, 0] = start
        psi = start.clone()
        blank = self.x[:, self.blank]
        for t in range(1, self.length):
            new[:, :, t, 0] = _logadd(new[:, :, t - 1, 0], phi[:, :, t - 1]) + x[:, :, t]
            new[:, :, t, 1] = _logadd(new[:, :, t - 1, 0], new[:, :, t - 1, 1]) + blank[t]
            psi = _logadd(psi, phi[:, :, t - 1] + x[:, :, t])
        return new, psi

    @staticmethod
    def final(r: torch.Tensor) -> torch.Tensor:
        """log P(transcript = g) of N prefixes' r (N, T, 2)."""
        return _logadd(r[:, -1, 0], r[:, -1, 1])


def joint_search(
    model: torch.nn.Module,
    features: torch.Tensor,
    mask: torch.Tensor | None,
    beam_size: int,
    ctc_weight: float,
    max_len: int,
    prefix: list[int],
) -> list[list[int]]:
    """Joint CTC / attention beam search (see the module docstring), each clip on its own."""
    memory, logits, positions = encode_with_ctc(model, features, mask)
    log_probs = torch.log_softmax(logits, -1)
    cfg = model.config
    out = []
    with inference(model):  # the decoder reads the memory, an inference-mode tensor
        for row in range(memory.shape[0]):
            length = memory.shape[1] if positions is None else int(positions[row].sum())
            out.append(
                _joint_one(
                    model,
                    memory[row : row + 1, :length],
                    log_probs[row, :length],
                    cfg,
                    beam_size,
                    ctc_weight,
                    max_len,
                    prefix,
                )
            )
    return out


def _joint_one(model, memory, log_probs, cfg, beam, weight, max_len, prefix) -> list[int]:
    """One clip's joint search: memory (1, L, C), CTC log-probabilities (L, V)."""
    device, vocab = memory.device, log_probs.shape[-1]
    scorer = PrefixScorer(log_probs, cfg.pad_id)
    never = torch.zeros(vocab, dtype=torch.bool, device=device)
    never[[cfg.pad_id, *prefix]] = True  # the blank and the prompt are never output tokens
    never[cfg.eos_id] = False
    pre_beam = min(vocab - int(never.sum()), max(PRE_BEAM, int(1.5 * beam)))
    tokens = torch.empty(1, 0, dtype=torch.long, device=device)  # (N, t) live hypotheses' outputs
    r = scorer.initial()[None]  # (N, T, 2): each live hypothesis's CTC state
    att = torch.zeros(1, device=device)  # and its decoder log-probability
    ended: list[tuple[float, list[int]]] = []
    start = torch.tensor(prefix, dtype=torch.long, device=device)
    for step in range(min(max_len, cfg.max_positions - len(prefix))):
        n = tokens.shape[0]
        tgt = torch.cat([start.expand(n, -1), tokens], dim=1)
        logits = model.decode(tgt, memory.expand(n, -1, -1), None)[:, -1].float()
        scores = torch.log_softmax(logits, -1).masked_fill(never, float("-inf"))  # (N, V)
        candidates = scores.topk(pre_beam, dim=-1).indices  # (N, K)
        last = tokens[:, -1] if step else torch.zeros(n, dtype=torch.long, device=device)
        empty = torch.full((n,), step == 0, dtype=torch.bool, device=device)
        new_r, new_psi = scorer.extend(r, last, empty, candidates)  # (N, K, T, 2), (N, K)
        is_eos = candidates == cfg.eos_id
        ctc_end = scorer.final(r)[:, None].expand_as(new_psi)
        new_psi = torch.where(is_eos, ctc_end, new_psi)
        new_att = att[:, None] + scores.gather(1, candidates)
        total = (1 - weight) * new_att + weight * new_psi  # (N, K)
        order = total.flatten().topk(min(beam, total.numel())).indices
        keep = []
        for flat in order.tolist():
            i, j = divmod(flat, candidates.shape[1])
            if bool(is_eos[i, j]):
                ended.append((float(total[i, j]), tokens[i].tolist()))
            else:
                keep.append((i, j))
        # a score only falls as tokens are added (log-probabilities; psi of a longer prefix is
        # of fewer transcripts): a live hypothesis under the best ended one can never win
        best_ended = max((s for s, _ in ended), default=float("-inf"))
        keep = [(i, j) for i, j in keep if float(total[i, j]) > best_ended]
        if not keep:
            break
        rows = torch.tensor([i for i, _ in keep], device=device)
        cols = torch.tensor([j for _, j in keep], device=device)
        tokens = torch.cat([tokens[rows], candidates[rows, cols][:, None]], dim=1)
        r, att = new_r[rows, cols], new_att[rows, cols]
    else:  # the length bound: the live hypotheses end where they are
        ended += [
            (float((1 - weight) * att[i] + weight * scorer.final(r)[i]), tokens[i].tolist())
            for i in range(tokens.shape[0])
        ]
    return max(ended, key=lambda e: e[0])[1] if ended else []
