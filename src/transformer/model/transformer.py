"""The three model families (§3, Figure 1): the encoder-decoder, a decoder-only language model and
a bidirectional encoder, each over the stacks of `model/stacks.py`; `model/build.py` assembles them
from a ModelConfig, and the encoder's heads are in `model/heads.py`.

Legend (model/__init__.py): B batch, S source length, T target length, L length of either side's
sequence, C d_model, V vocabulary, P patches. Token masks are (B, L) booleans, True = real token;
the families' entry points also take integer 0/1 masks (Hugging Face's `attention_mask`) and check
both (masks.as_token_mask).
"""

from __future__ import annotations

import torch
from torch import nn

from ..config import ModelConfig
from .cache import KVCache
from .detection import DetectionTransformer
from .heads import MaskedLMHead, PooledClassifier, SentenceHead, SpanHead, mean_pooled
from .linear import linear
from .masks import as_token_mask, padding_mask
from .stacks import AudioEncoder, Decoder, Encoder, ImageEncoder


def _output_scale(cfg: ModelConfig, hidden: torch.Tensor) -> torch.Tensor:
    """T5 v1.0 scales the decoder's last state by d_model^-1/2 before its tied output layer
    (scale_output)."""
    return hidden * cfg.d_model**-0.5 if cfg.scale_output else hidden


class EncoderDecoder(nn.Module):
    """The paper's model (Figure 1): encode the source once, decode the target with teacher forcing
    or step by step."""

    def __init__(
        self,
        config: ModelConfig,
        encoder: Encoder | AudioEncoder | ImageEncoder,
        decoder: Decoder,
        lm_head: nn.Linear,
        ctc_head: nn.Linear | None = None,
    ):
        super().__init__()
        self.config = config
        self.encoder = encoder
        self.decoder = decoder
        self.lm_head = lm_head
        self.ctc_head = ctc_head
        """A speech model's CTC head on the encoder (model.audio.ctc), for training only."""

    def encode(
        self,
        src_ids: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ):
        """(B, S) -> memory (B, S, C) and the source mask (B, S) (computed from pad_id when
        omitted). A speech model (config.audio) takes log-mel features (B, n_mels, F) and a frame
        mask (B, F) or None, and returns memory (B, L, C) with the positions' mask (B, L) or
        None. An image captioner (config.vision) takes pixels (B, channels, height, width) and no
        mask, and returns memory (B, 1 + P, C) ([CLS] and the patches) with the mask None: every
        position is real. With need_weights, also the encoder's self-attention weights per
        layer."""
        if isinstance(self.encoder, ImageEncoder):
            if src_mask is not None:
                raise ValueError("an image encoder takes pixels only: no src_mask")
            out = self.encoder(src_ids, need_weights)
            return (out[0], None, out[1]) if need_weights else (out, None)
        if isinstance(self.encoder, AudioEncoder):
            if src_mask is not None:
                src_mask = as_token_mask(
                    src_mask, (src_ids.shape[0], src_ids.shape[-1]), "src_mask"
                )
            out = self.encoder(src_ids, src_mask, need_weights=need_weights)
            return out
        src_mask = as_token_mask(src_mask, src_ids.shape, "src_mask")
        if src_mask is None:
            src_mask = padding_mask(src_ids, self.config.pad_id)
        out = self.encoder(src_ids, src_mask, need_weights=need_weights)
        if need_weights:
            memory, weights = out
            return memory, src_mask, weights
        return out, src_mask

    def decode(
        self,
        tgt_ids: torch.Tensor,
        memory: torch.Tensor | None,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
        need_weights: bool = False,
    ):
        """(B, T) target ids over memory -> logits (B, T, V) (and attention weights with
        need_weights)."""
        tgt_mask = as_token_mask(tgt_mask, tgt_ids.shape, "tgt_mask")
        if memory is not None:
            src_mask = as_token_mask(src_mask, memory.shape[:2], "src_mask")
        out = self.decoder(tgt_ids, tgt_mask, memory, src_mask, cache, need_weights)
        if need_weights:
            return linear(self.lm_head, _output_scale(self.config, out[0])), out[1]
        return linear(self.lm_head, _output_scale(self.config, out))

    def new_cache(self) -> KVCache:
        return KVCache.empty(len(self.decoder.layers))

    def forward(
        self,
        src_ids: torch.Tensor,
        tgt_ids: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
        ctc: bool = False,
    ):
        """src (B, S), tgt (B, T) -> logits (B, T, V). Position t sees tgt[:, :t+1] and the whole
        source (a captioner's source: pixels (B, channels, height, width)). With ctc (a speech
        model with a CTC head): also the CTC head's logits over the encoder's positions (B, L, V)
        and their mask (B, L) or None."""
        memory, src_mask = self.encode(src_ids, src_mask)
        logits = self.decode(tgt_ids, memory, src_mask, tgt_mask)
        if not ctc:
            return logits
        if self.ctc_head is None:
            raise ValueError("this model has no CTC head: set model.audio.ctc = true to train one")
        return logits, linear(self.ctc_head, memory), src_mask


class DecoderOnly(nn.Module):
    """A language model (GPT, Llama): masked self-attention only; returns next-token logits."""

    def __init__(self, config: ModelConfig, decoder: Decoder, lm_head: nn.Linear):
        super().__init__()
        self.config = config
        self.decoder = decoder
        self.lm_head = lm_head

    def new_cache(self) -> KVCache:
        return KVCache.empty(len(self.decoder.layers))

    def forward(
        self,
        ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
        need_weights: bool = False,
        last_only: bool = False,
        positions: torch.Tensor | None = None,
    ):
        """ids (B, T), attention_mask (B, T) (None = no padding) -> logits (B, T, V).

        With a cache, ids are the new tokens only (a left-padded prompt first, then one token per
        step). last_only: logits (B, 1, V) of the last position only (a prompt's next token),
        skipping the output layer for the others. positions (B, T) bool: logits (N, V) of the N
        positions marked only (the ones a loss reads: a chat's assistant turns), in row order.
        """
        attention_mask = as_token_mask(attention_mask, ids.shape, "attention_mask")
        out = self.decoder(ids, attention_mask, cache=cache, need_weights=need_weights)
        hidden = out[0] if need_weights else out
        if last_only:
            hidden = hidden[:, -1:]
        if positions is not None:
            hidden = hidden[positions]  # (N, C)
        if need_weights:
            return self.output_logits(hidden), out[1]
        return self.output_logits(hidden)

    def output_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The decoder's last states (..., C) -> next-token logits (..., V)."""
        return linear(self.lm_head, _output_scale(self.config, hidden))


class EncoderOnly(nn.Module):
    """A bidirectional encoder (BERT): returns hidden states; the heads are separate modules."""

    def __init__(
        self,
        config: ModelConfig,
        encoder: Encoder,
        mlm_head: MaskedLMHead | None = None,
        pooler: PooledClassifier | None = None,
        span_head: SpanHead | None = None,
        sentence_head: SentenceHead | None = None,
    ):
        super().__init__()
        self.config = config
        self.encoder = encoder
        self.mlm_head = mlm_head
        self.pooler = pooler
        self.span_head = span_head
        self.sentence_head = sentence_head

    def forward(
        self,
        ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        need_weights: bool = False,
    ):
        """ids (B, L), attention_mask (B, L) (None = no padding) -> hidden states (B, L, C).
        An image encoder (config.vision) takes pixels (B, channels, height, width) instead of ids,
        and no mask."""
        if isinstance(self.encoder, ImageEncoder):
            if attention_mask is not None or token_type_ids is not None:
                raise ValueError(
                    "an image encoder takes pixels only: no attention_mask or token_type_ids"
                )
            return self.encoder(ids, need_weights)
        attention_mask = as_token_mask(attention_mask, ids.shape, "attention_mask")
        return self.encoder(ids, attention_mask, token_type_ids, need_weights)

    def classify(
        self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """ids (B, L), attention_mask (B, L) -> class logits (B, n_classes); or pixels
        (B, channels, height, width) of an image encoder."""
        if self.pooler is None or self.pooler.classifier is None:
            raise ValueError(
                "this encoder has no classifier (n_classes = 0): train one with objective = "
                '"classify"'
            )
        if isinstance(self.encoder, ImageEncoder):
            return self.pooler(self(ids))
        mask = as_token_mask(attention_mask, ids.shape, "attention_mask")
        return self.pooler(self.encoder(ids, mask), mask)

    def sentence_embeddings(
        self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """ids (B, L) of [CLS] text [SEP] rows, attention_mask (B, L) -> the mean of each row's
        hidden states over its real tokens (B, C): what the sentence head compares."""
        mask = as_token_mask(attention_mask, ids.shape, "attention_mask")
        return mean_pooled(self.encoder(ids, mask), mask)

    def sentence_logits(
        self,
        question_ids: torch.Tensor,
        question_mask: torch.Tensor | None,
        sentence_ids: torch.Tensor,
        sentence_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        """Q questions and the S sentences of one context, each a [CLS] text [SEP] row ((Q, L) and
        (S, L') ids with their masks) -> (Q, S) logits: is the sentence part of the question's
        answer (see heads.SentenceHead)."""
        if self.sentence_head is None:
            raise ValueError(
                'this encoder has no sentence head: train one with objective = "qa_sentences" '
                "(SQuAD data)"
            )
        questions = self.sentence_embeddings(question_ids, question_mask)
        return self.sentence_head(questions, self.sentence_embeddings(sentence_ids, sentence_mask))

    def spans(
        self,
        ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """ids (B, L), attention_mask (B, L), token_type_ids (B, L) -> start and end logits (B, L)
        each, -inf at padding."""
        if self.span_head is None:
            raise ValueError(
                'this encoder has no span head: train one with objective = "qa" (SQuAD data)'
            )
        mask = as_token_mask(attention_mask, ids.shape, "attention_mask")
        start, end = self.span_head(self.encoder(ids, mask, token_type_ids))
        if mask is not None:
            start = start.masked_fill(~mask, float("-inf"))
            end = end.masked_fill(~mask, float("-inf"))
        return start, end


Model = EncoderDecoder | EncoderOnly | DecoderOnly | DetectionTransformer
