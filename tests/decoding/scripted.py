"""A fake encoder-decoder for decoding tests: each step's next-token logits come from a script of
(sentence, prefix), so a search's outputs and scores can be worked out by hand.

The sentence is the source's first token; the prefix (the output so far) rides in the cache's
self-attention slot, so beam reordering moves it as it moves real keys and values.
"""

from __future__ import annotations

import torch
from torch import nn

import transformer as T
from transformer.config import ModelConfig
from transformer.model.cache import KVCache

PAD = 0


class ScriptedModel(T.EncoderDecoder):
    """Subclasses give row(sentence, prefix) -> (V,) logits of the next token."""

    def __init__(self, vocab: int):
        nn.Module.__init__(self)
        self.config = ModelConfig(vocab_size=vocab, d_model=8, n_heads=1, d_ff=8)
        self.anchor = nn.Parameter(torch.zeros(1))

    def row(self, sentence: int, prefix: tuple[int, ...]) -> torch.Tensor:
        raise NotImplementedError

    def new_cache(self):
        return KVCache.empty(1)

    def encode(self, src_ids, src_mask=None, need_weights=False):
        return src_ids[:, :1].float(), src_ids != PAD

    def decode(self, tgt_ids, memory, src_mask, tgt_mask=None, cache=None, need_weights=False):
        layer = cache.layers[0]
        if memory is not None:
            layer.cross_kv = (memory, memory)
            prefix = torch.zeros(len(tgt_ids), 0)
        else:
            prefix = torch.cat([layer.self_kv[0], tgt_ids.float()], dim=1)
        layer.self_kv = (prefix, prefix)
        # beams share a source: each beam row reads its sentence's
        sentences = layer.cross_kv[0][:, 0].long().repeat_interleave(cache.group_size)
        rows = [
            self.row(s, tuple(p))
            for s, p in zip(sentences.tolist(), prefix.long().tolist(), strict=True)
        ]
        return torch.stack(rows)[:, None]  # (B, 1, V)
