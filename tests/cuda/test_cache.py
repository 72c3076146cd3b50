"""The KV cache on the device (model/cache.py): step-by-step decoding through beam search's
reorders gives the logits of a full forward pass over each row's whole sequence, and beam search
over the prefix tree gives the hypotheses of the flat cache.

Legend (model/__init__.py): B rows, S source length, T tokens so far, V vocabulary; N sentences
and G beams per sentence.
"""

from __future__ import annotations

import pytest
import torch

import transformer as T
from tests.cuda.common import TOLERANCE, assert_rel_close
from tests.model.test_cache import flat
from transformer.config import cpu_tiny
from transformer.model.cache import MIN_CAPACITY, KVCache
from transformer.model.positional import RelativePositionBias
from transformer.model.transformer import EncoderDecoder

pytestmark = pytest.mark.cuda

V, START, G, STEPS = 40, 2, 3, 24
T5_LAYOUT = dict(
    positional="t5_bias",
    relative_bias=dict(buckets=8, max_distance=12),
    scale_attention=False,
    norm="rmsnorm",
    norm_position="pre",
    bias=False,
    activation="geglu_tanh",
    scale_embedding=False,
)
LLAMA_LAYOUT = dict(
    positional="rope", n_kv_heads=2, norm="rmsnorm", norm_position="pre", activation="swiglu"
)


def tiny(arch: str, device, vocab: int = V, **changes) -> torch.nn.Module:
    """A random cpu_tiny model (d_model 64, 2+2 layers) in eval mode on the device; T5 bias tables
    of order 1, so that a wrong relative position shows."""
    torch.manual_seed(0)
    model = T.build_model(cpu_tiny(vocab_size=vocab, arch=arch, **changes)).eval()
    for module in model.modules():
        if isinstance(module, RelativePositionBias):
            torch.nn.init.normal_(module.table.weight, std=1.0)
    return model.to(device)


class Scenario:
    """Three sentences decoded step by step over the cache on the device, with the reorders beam
    search makes; each row's whole sequence is kept to check every step against a full forward
    pass. Sources are right-padded; decoder-only prompts are left-padded."""

    def __init__(self, model, device, share_prefixes: bool):
        self.model, self.device = model, device
        self.gen = torch.Generator().manual_seed(0)  # drawn on the CPU: the same on any device
        self.cache = model.new_cache()
        self.cache.share_prefixes = share_prefixes
        self.enc_dec = isinstance(model, EncoderDecoder)
        self.sent = [0, 1, 2]  # each row's source
        if self.enc_dec:
            self.src = self.ids(3, 9)
            self.src[1, 6:] = 0
            self.src[2, 2:] = 0
            self.seqs, self.real = [[START] for _ in range(3)], [[True] for _ in range(3)]
            memory, src_mask = model.encode(self.src)
            out = model.decode(self.tensor(self.seqs), memory, src_mask, cache=self.cache)
            self.check(out, width=1)
        else:
            ids = self.ids(3, 6)
            mask = torch.ones(3, 6, dtype=torch.bool)
            mask[1, :2] = False  # left-padded prompts: 6, 4 and 1 real tokens
            mask[2, :5] = False
            mask = mask.to(device)
            self.seqs, self.real = ids.tolist(), mask.tolist()
            out = model(ids, mask, cache=self.cache)
            self.check(out[mask], real_only=True)

    def ids(self, rows: int, width: int) -> torch.Tensor:
        return torch.randint(4, V, (rows, width), generator=self.gen).to(self.device)

    def tensor(self, rows) -> torch.Tensor:
        return torch.tensor(rows, device=self.device)

    def full(self) -> torch.Tensor:
        """Logits (B, T, V) of a forward pass over every row's whole sequence, without a cache."""
        if self.enc_dec:
            return self.model(self.src[self.tensor(self.sent)], self.tensor(self.seqs))
        return self.model(self.tensor(self.seqs), self.tensor(self.real))

    def check(self, out: torch.Tensor, width: int = 1, real_only: bool = False) -> None:
        full = self.full()
        ref = full[self.tensor(self.real)] if real_only else full[:, -width:]
        assert_rel_close(out, ref, TOLERANCE[torch.float32], f"step {len(self.seqs[0])}")

    def reorder(self, rows: list[int], **kw) -> None:
        self.cache.reorder(self.tensor(rows), **kw)
        self.sent = [self.sent[r] for r in rows]
        self.seqs = [list(self.seqs[r]) for r in rows]
        self.real = [list(self.real[r]) for r in rows]

    def parents(self, groups: list[int]) -> list[int]:
        """Every beam moves to a random beam of its own sentence, as beam search does."""
        pick = torch.randint(G, (len(groups) * G,), generator=self.gen).tolist()
        return [G * g + pick[G * i + j] for i, g in enumerate(groups) for j in range(G)]

    def step(self, width: int = 1) -> None:
        tokens = self.ids(len(self.seqs), width)
        for seq, real, tok in zip(self.seqs, self.real, tokens.tolist(), strict=True):
            seq += tok
            real += [True] * width
        if self.enc_dec:
            out = self.model.decode(tokens, None, None, cache=self.cache)
        else:
            out = self.model(tokens, cache=self.cache)
        self.check(out, width)


@torch.no_grad()
@pytest.mark.parametrize("share_prefixes", [True, False], ids=["prefix-tree", "flat"])
@pytest.mark.parametrize(
    "arch,changes",
    [
        ("encoder-decoder", dict(positional="sinusoidal")),
        ("encoder-decoder", dict(T5_LAYOUT, n_kv_heads=2)),
        ("decoder", LLAMA_LAYOUT),
        ("decoder", dict(positional="sinusoidal")),
    ],
    ids=["enc-dec-sinusoidal", "enc-dec-t5-gqa", "decoder-rope-gqa", "decoder-sinusoidal"],
)
def test_cached_decoding_equals_full_recompute(arch, changes, share_prefixes, device):
    # 24 steps cross the storage's growth (16 positions); rows become groups of G beams sharing a
    # source, beams move to random parents, a sentence stops, a step feeds two tokens (flattening
    # a prefix tree), and a general reorder ends the groups.
    run = Scenario(tiny(arch, device, **changes), device, share_prefixes)
    cache, groups = run.cache, [0, 1, 2]
    for step in range(1, STEPS + 1):
        if step == 1:
            run.reorder([r for r in range(3) for _ in range(G)], group_size=G)
        elif step == 10:  # sentence 1 stops: its group leaves
            run.reorder(run.parents([0, 2]), group_size=G, sources=run.tensor([0, 2]))
            groups = [0, 1]
        elif step == 18:  # any row from anywhere: one source per row again
            run.reorder([3, 0, 1, 1, 5])
            groups = None
        elif groups is not None:
            run.reorder(run.parents(groups), group_size=G)
        run.step(width=2 if step == 14 else 1)
        tree = cache.ancestors is not None
        assert tree == (share_prefixes and step < 18 and step != 14)
        keys = cache.layers[0].self_kv[0]
        assert keys.device.type == device.type
        assert keys.data_ptr() == cache.layers[0].buffers[0].data_ptr()  # the in-place storage
    assert cache.layers[0].buffers[0].shape[2] > MIN_CAPACITY  # the storage grew on the device


@pytest.mark.parametrize(
    "arch,layout",
    [
        ("encoder-decoder", dict(positional="sinusoidal")),
        ("encoder-decoder", dict(T5_LAYOUT, relative_bias=dict(buckets=4, max_distance=6))),
        ("decoder", LLAMA_LAYOUT),
    ],
    ids=["enc-dec-sinusoidal", "enc-dec-t5", "decoder-rope-gqa"],
)
def test_beam_search_prefix_tree_equals_flat_cache(arch, layout, device, monkeypatch):
    # In float64: the two layouts attend in different shapes (one (G, S) block per sentence
    # against one row per beam), so their logits differ by float rounding, and a random model's
    # near-ties between beams could flip on it. The cache's bookkeeping, what this compares, is the
    # same in any dtype.
    grown = []
    grow_tree = KVCache.grow_tree
    monkeypatch.setattr(KVCache, "grow_tree", lambda self: grown.append(1) or grow_tree(self))
    sources = [[5, 6, 7, 8, 9, 3], [11, 12, 3], [13, 3], [14, 15, 4, 5, 6, 7, 8, 3]]
    kw = dict(
        beam_size=4,
        max_len_a=1,
        max_len_b=12,
        n_best=3,
        return_scores=True,
        length_penalty=1.0,
        length_penalty_kind="power",
    )
    for eos_bias in (0.0, 2.5):  # outputs of the maximum length; sentences ending at their </s>
        model = tiny(arch, device, vocab=16, output_bias=True, **layout).to(torch.float64)
        with torch.no_grad():
            model.lm_head.bias[3] = eos_bias
        ids, scores = T.beam_search(model, sources, **kw)
        tree_steps = len(grown)
        flat_ids, flat_scores = T.beam_search(flat(model), sources, **kw)
        # the first search used the prefix tree, the second did not
        assert tree_steps > 0 and len(grown) == tree_steps
        assert ids.device.type == device.type
        assert torch.equal(ids, flat_ids)
        torch.testing.assert_close(flat_scores, scores, rtol=1e-6, atol=1e-6)  # -inf: no hypothesis
        longest = torch.tensor([len(s) + 12 for s in sources], device=device)
        ended = (ids[:, 0] != 0).sum(-1) < longest
        assert eos_bias == 0.0 or ended.any()  # with the bias some sentences end at their </s>
        grown.clear()
