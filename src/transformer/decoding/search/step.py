"""The one interface every decoding strategy uses: encode the source once, then step one position.

Legend (model/__init__.py): B batch (sentences or beam rows), S source / prompt length, T tokens
output so far, V vocabulary, H heads; spelled out: layers, keys (self-attention keys: the cache's
columns).

For an encoder-decoder model the source is encoded once and the decoder starts from the
model's start token (`ModelConfig.start_id`), or from a prefix of forced tokens (Whisper's
`<|startoftranscript|> <|notimestamps|>`), which the output does not repeat. A speech model's
source is log-mel features (B, n_mels, F) with a frame mask (B, F) or None; an image captioner's
(config.vision) is pixels (B, channels, size, size) in [-1, 1], no mask: every one of its 1 + P
encoder positions is real, and they are its source length. Token ids can be
suppressed: never generated, or not as the first token (Whisper's blank and </s>); they get
-inf logits before the softmax. For a decoder-only model the source *is* the
prompt: a batch of prompts is left-padded so every row's next token lands in the same
column, and the model counts positions from each row's first real token. Either way a step
feeds one token per row and costs one new position of work over the KV cache; rows can be
reordered, repeated (beams) or dropped (finished sentences) with `reorder`. With repetition guards
(repetition.py) the Stepper also keeps each row's output so far, reordered with the rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import torch

from ...model.transformer import DecoderOnly, EncoderDecoder
from .compiled import compiled_step
from .repetition import RepetitionGuards

SourceInput = torch.Tensor | Sequence[Sequence[int]] | Sequence[torch.Tensor]


@contextlib.contextmanager
def inference(model: torch.nn.Module):
    """Eval mode (no dropout) and inference mode (no autograd) for the duration; the model's mode
    is restored after."""
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        model.train(was_training)


def _rows(src_ids: SourceInput, src_mask: torch.Tensor | None, pad_id: int) -> list[torch.Tensor]:
    """Any accepted input form -> one 1-D LongTensor of real tokens per row."""
    if isinstance(src_ids, torch.Tensor):
        ids = src_ids[None] if src_ids.dim() == 1 else src_ids
        if ids.dim() != 2:
            raise ValueError(
                "src_ids must be (batch, length) token ids; got a tensor of shape "
                f"{tuple(src_ids.shape)}"
            )
        if ids.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.bool):
            raise ValueError(f"src_ids must hold integer token ids; got dtype {ids.dtype}")
        mask = ids != pad_id if src_mask is None else src_mask.to(torch.bool).reshape(ids.shape)
        return [row[m] for row, m in zip(ids.long(), mask, strict=True)]
    if src_mask is not None:
        raise ValueError(
            "src_mask is only for tensor input: a list of sequences has no padding to mask"
        )
    if len(src_ids) == 0:
        raise ValueError("src_ids is empty: pass at least one sequence")
    return [
        torch.as_tensor(
            list(r) if not isinstance(r, torch.Tensor) else r, dtype=torch.long
        ).reshape(-1)
        for r in src_ids
    ]


def pad_rows(
    rows: list[torch.Tensor], pad_id: int, left: bool, device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of token ids -> (B, S) ids and (B, S) bool mask (True = real), padded right or left.

    Built where the rows are (the CPU, as tokenizers give them) and moved in one copy: one copy
    per row would be one transfer per sentence to a GPU."""
    width = max((len(r) for r in rows), default=0)
    home = rows[0].device if rows else torch.device("cpu")
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long, device=home)
    mask = torch.zeros(len(rows), width, dtype=torch.bool, device=home)
    for i, r in enumerate(rows):
        n = len(r)
        cols = slice(width - n, width) if left else slice(0, n)
        ids[i, cols] = r.to(home)
        mask[i, cols] = True
    return ids.to(device), mask.to(device)


class Stepper:
    """Incremental decoding over the model's KV cache.

    `start()` encodes the source (encoder-decoder) or reads the prompt (decoder-only) and
    returns the first next-token log-probabilities (B, V); `step(tokens)` feeds one token per
    row and returns the next (B', V); `reorder(index)` keeps/repeats/drops rows.
    With need_weights, `weights` holds the last call's attention: {"self": [(B, H, keys) per
    layer], "cross": [(B, H, S) per layer] or None} for the query that predicts the next token.
    With guards, the log-probabilities are those the guards leave (repetition.py), and `output`
    holds each row's tokens fed so far (B, T); without, `output` is None and nothing is kept.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        src_ids: SourceInput,
        src_mask: torch.Tensor | None = None,
        need_weights: bool = False,
        guards: RepetitionGuards | None = None,
        prefix: Sequence[int] | None = None,
        suppress: Sequence[int] = (),
        begin_suppress: Sequence[int] = (),
        static: bool = False,
    ):
        if not isinstance(model, EncoderDecoder | DecoderOnly):
            raise ValueError(
                f"{type(model).__name__} cannot generate text: decoding needs an encoder-decoder "
                "or decoder-only model (arch='encoder-decoder' or 'decoder')"
            )
        self.model = model
        self.config = model.config
        self.decoder_only = isinstance(model, DecoderOnly)
        self.need_weights = need_weights
        self.device = next(model.parameters()).device
        self.audio = self.config.audio is not None
        self.image = self.config.vision is not None and not self.decoder_only
        if prefix is not None and self.decoder_only:
            raise ValueError("a decoder prefix is for encoder-decoder models: put it in the prompt")
        self.prefix = [self.config.start_id] if prefix is None else [int(t) for t in prefix]
        if not self.prefix:
            raise ValueError("the decoder prefix is empty: give at least the start token")
        vocab = self.config.target_vocab_size
        self.suppress = self._ids(suppress, vocab, "suppress_tokens")
        self.begin_suppress = self._ids(begin_suppress, vocab, "begin_suppress_tokens")
        self.batch_size = 0
        if self.audio:
            self._audio_source(src_ids, src_mask)
        elif self.image:
            self._image_source(src_ids, src_mask)
        else:
            self._token_source(src_ids, src_mask)
        self.cache = model.new_cache()
        if need_weights:  # weights are per row: keep each beam's history in its own row
            self.cache.share_prefixes = False
        self.weights: dict | None = None
        self.static = (
            compiled_step(model)
            if static and self.decoder_only and self.batch_size == 1 and not need_weights
            else None
        )  # the model's compiled step (compiled.py), when it has one and this is one row
        self.slot = 0  # with static: the cache slot of the next token fed
        self.guards = guards
        self.output = (
            None
            if guards is None
            else torch.zeros(self.batch_size, 0, dtype=torch.long, device=self.device)
        )  # (B, T): the tokens fed by step, the guards' history

    def _ids(self, ids: Sequence[int], vocab: int, name: str) -> torch.Tensor | None:
        ids = sorted({int(t) for t in ids})
        bad = [t for t in ids if not 0 <= t < vocab]
        if bad:
            raise ValueError(f"{name} holds id {bad[0]}, outside the vocabulary [0, {vocab})")
        return torch.tensor(ids, dtype=torch.long, device=self.device) if ids else None

    def _audio_source(self, features, mask: torch.Tensor | None) -> None:
        """Log-mel features (B, n_mels, F) or (n_mels, F), frame mask (B, F) or None."""
        if not isinstance(features, torch.Tensor) or not features.is_floating_point():
            raise ValueError(
                "a speech model decodes log-mel features: pass a float tensor (B, n_mels, frames) "
                "(transformer.data.audio.log_mel)"
            )
        features = features[None] if features.dim() == 2 else features
        if mask is not None:
            mask = mask.to(torch.bool).reshape(features.shape[0], features.shape[-1])
            mask = None if bool(mask.all()) else mask.to(self.device)
        self.src_ids, self.src_mask = features.to(self.device), mask
        self.batch_size = features.shape[0]
        frames = (
            torch.full((self.batch_size,), features.shape[-1], device=self.device)
            if mask is None
            else mask.sum(-1)
        )
        self.src_lengths = self.config.audio.positions_of(frames)  # (B,): encoder positions

    def _image_source(self, pixels, mask: torch.Tensor | None) -> None:
        """Pixels (B, channels, size, size) or (channels, size, size) in [-1, 1]; no mask."""
        if not isinstance(pixels, torch.Tensor) or not pixels.is_floating_point():
            raise ValueError(
                "an image captioner decodes pixels: pass a float tensor (B, channels, size, size) "
                "in [-1, 1] (transformer.data.image_tensors.to_pixels)"
            )
        if mask is not None:
            raise ValueError("an image has no source mask: every patch is real; drop src_mask")
        pixels = pixels[None] if pixels.dim() == 3 else pixels
        self.src_ids, self.src_mask = pixels.to(self.device), None
        self.batch_size = pixels.shape[0]
        positions = self.config.vision.n_patches + 1
        self.src_lengths = torch.full((self.batch_size,), positions, device=self.device)

    def _token_source(self, src_ids: SourceInput, src_mask: torch.Tensor | None) -> None:
        rows = _rows(src_ids, src_mask, self.config.pad_id)
        if self.decoder_only:
            empty = [i for i, r in enumerate(rows) if len(r) == 0]
            if empty:
                raise ValueError(
                    f"prompt {empty[0]} is empty: a language model needs at least one token to "
                    f"continue (start prompts with <s>, id {self.config.bos_id}, if the model "
                    "expects it)"
                )
        self.src_ids, self.src_mask = pad_rows(
            rows, self.config.pad_id, left=self.decoder_only, device=self.device
        )
        self.src_lengths = self.src_mask.sum(-1)  # (B,)
        self.batch_size = len(rows)

    @property
    def source_positions(self) -> int:
        """Keys of the cross-attention: source tokens, a speech encoder's positions, or an image
        encoder's ([CLS] and the patches)."""
        if self.image:
            return self.config.vision.n_patches + 1
        if self.audio:
            return self.config.audio.positions_of(self.src_ids.shape[-1])
        return self.src_ids.shape[1]

    @property
    def prefix_length(self) -> int:
        """Decoder positions before the first output token (<s>, or the forced prefix)."""
        return 0 if self.decoder_only else len(self.prefix)

    @property
    def max_positions(self) -> int | None:
        """How many positions the decoder can see (None = unbounded)."""
        return None if self.config.positional == "none" else self.config.max_positions

    def max_new_tokens(self, a: float, b: int) -> torch.Tensor:
        """(B,) per-row output bound floor(a * source_length + b), capped by the position table."""
        limit = torch.floor(a * self.src_lengths.double() + b).long().clamp(min=0)
        if self.max_positions is not None:
            # Encoder-decoder: <s> takes position 0 and y_1..y_{T-1} the next ones, so T <=
            # max_positions. Decoder-only: the prompt takes P positions and y_1..y_{N-1} the next
            # ones, so N <= max_positions - P + 1.
            # A prefix of P forced tokens: T <= max_positions - P + 1.
            room = (
                self.max_positions - self.src_lengths + 1
                if self.decoder_only
                else torch.full_like(limit, self.max_positions - self.prefix_length + 1)
            )
            limit = torch.minimum(limit, room)
        return limit.clamp(min=0).cpu()

    def _log_probs(self, out, last_only: bool, first: bool = False) -> torch.Tensor:
        if self.need_weights:
            logits, weights = out
            self.weights = {
                "self": [w[:, :, -1] for w in weights["self"]],  # (B, H, keys)
                "cross": None
                if self.decoder_only
                else [w[:, :, -1] for w in weights["cross"]],  # (B, H, S)
            }
        else:
            logits = out
        logits = logits[:, -1] if last_only else logits[:, 0]
        for ids in (self.suppress, self.begin_suppress if first else None):
            if ids is not None:
                logits = logits.index_fill(1, ids, -float("inf"))
        if self.guards is not None:
            return self.guards.log_probs(logits, self.output)  # (B, V)
        return torch.log_softmax(
            logits, dim=-1, dtype=torch.float32
        )  # (B, V); a bf16 model's logits without a copy

    def start(self) -> torch.Tensor:
        """Run the source/prompt; return the first log-probabilities (B, V)."""
        if self.decoder_only:
            mask = None if bool(self.src_mask.all()) else self.src_mask
            out = self.model(
                self.src_ids, mask, cache=self.cache, need_weights=self.need_weights, last_only=True
            )
            if self.static is not None:  # the prompt's keys and values move to its buffers
                self.slot = self.src_ids.shape[1]
                self.static.start(self.cache, self.slot)
            return self._log_probs(out, last_only=True, first=True)
        memory, src_mask = self.model.encode(self.src_ids, self.src_mask)[:2]
        start = torch.tensor(self.prefix, dtype=torch.long, device=self.device).expand(
            self.batch_size, -1
        )  # (B, P)
        out = self.model.decode(
            start, memory, src_mask, cache=self.cache, need_weights=self.need_weights
        )
        return self._log_probs(out, last_only=True, first=True)

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed one token per row (B,) -> log-probabilities of the next (B, V)."""
        ids = tokens.to(self.device).view(-1, 1)  # (B, 1)
        if self.output is not None:
            self.output = torch.cat([self.output, ids], dim=1)  # (B, T + 1)
        if self.static is not None:
            out = self.static(ids, self.slot)
            self.slot += 1
        elif self.decoder_only:
            out = self.model(ids, None, cache=self.cache, need_weights=self.need_weights)
        else:
            out = self.model.decode(
                ids, None, None, cache=self.cache, need_weights=self.need_weights
            )
        return self._log_probs(out, last_only=False)

    def reorder(
        self,
        index: torch.Tensor,
        group_size: int | None = None,
        sources: torch.Tensor | None = None,
    ) -> None:
        """Keep/reorder/repeat cache rows: index (B',) of current rows.

        Beam search passes group_size (beams per sentence) and sources (the sentences that stay,
        None = all): the beams of a sentence share its cross-attention keys/values
        (KVCache.reorder).
        """
        if self.static is not None:  # one row: it stays, or it leaves and the batch ends
            if index.tolist() not in ([], [0]):
                raise ValueError("a compiled step holds one row: it cannot be reordered")
            if len(index) == 0:
                self.static = None
            return
        index = index.to(self.device)
        self.cache.reorder(index, group_size, None if sources is None else sources.to(self.device))
        if self.output is not None:
            self.output = self.output[index]  # each row's history follows it


def blocked_tokens(
    log_probs: torch.Tensor, config, step: int | torch.Tensor, min_len: int | torch.Tensor
) -> torch.Tensor:
    """Never generate padding (unless it is also </s>); block </s> before min_len tokens. step and
    min_len are numbers, or (B,) tensors of each row's own (a running batch). In place; returns
    it."""
    if config.pad_id != config.eos_id:
        log_probs[:, config.pad_id] = -float("inf")
    if isinstance(step, torch.Tensor):
        early = (step < min_len).nonzero().squeeze(1)
        if len(early):
            log_probs[early, config.eos_id] = -float("inf")
    elif step < min_len:
        log_probs[:, config.eos_id] = -float("inf")
    return log_probs
