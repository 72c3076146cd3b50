"""The KV cache: in-place storage, beam reorders, the prefix tree, against recomputing everything."""

import pytest
import torch

import transformer as T
from transformer.config import cpu_tiny
from transformer.model.cache import KVCache
from transformer.model.positional import RelativePositionBias
from transformer.model.transformer import EncoderDecoder

V, START, G = 40, 2, 3
T5_LAYOUT = dict(positional="t5_bias", relative_bias=dict(buckets=8, max_distance=12), scale_attention=False,
                 norm="rmsnorm", norm_position="pre", bias=False, activation="geglu_tanh", scale_embedding=False)


def tiny(arch="encoder-decoder", vocab=V, **changes):
    torch.manual_seed(0)
    model = T.build_model(cpu_tiny(vocab_size=vocab, arch=arch, **changes)).eval()
    for module in model.modules():
        if isinstance(module, RelativePositionBias):  # biases of order 1: a wrong bucket shows
            torch.nn.init.normal_(module.table.weight, std=1.0)
    return model


class Scenario:
    """Three sentences decoded step by step on the cache, with the reorders beam search makes.

    Keeps every row's whole sequence, so that each step's logits can be checked against a
    forward pass over everything (no cache). Decoder-only prompts are left-padded.
    """

    def __init__(self, model, share_prefixes: bool):
        self.model, self.gen = model, torch.Generator().manual_seed(0)
        self.cache = model.new_cache()
        self.cache.share_prefixes = share_prefixes
        self.enc_dec = isinstance(model, EncoderDecoder)
        if self.enc_dec:
            self.src = torch.randint(4, V, (3, 7), generator=self.gen)
            self.src[1, 4:] = 0  # padded sources
            self.src[2, 2:] = 0
            self.seqs, self.real = [[START] for _ in range(3)], [[True] for _ in range(3)]
            memory, src_mask = model.encode(self.src)
            model.decode(torch.tensor(self.seqs), memory, src_mask, cache=self.cache)
        else:
            ids = torch.randint(4, V, (3, 5), generator=self.gen)
            mask = torch.ones(3, 5, dtype=torch.bool)
            mask[1, :2] = False  # left-padded prompts
            mask[2, :4] = False
            self.seqs, self.real = ids.tolist(), mask.tolist()
            model(ids, mask, cache=self.cache)
        self.sent = [0, 1, 2]  # each row's source

    def reorder(self, rows, **kw):
        self.cache.reorder(torch.tensor(rows), **kw)
        self.sent = [self.sent[r] for r in rows]
        self.seqs = [list(self.seqs[r]) for r in rows]
        self.real = [list(self.real[r]) for r in rows]

    def parents(self, groups):
        """Every beam moves to a random beam of its own sentence (group), as beam search does."""
        return [G * g + int(torch.randint(G, (1,), generator=self.gen)) for g in groups for _ in range(G)]

    def step(self, width=1, need_weights=False):
        tokens = torch.randint(4, V, (len(self.seqs), width), generator=self.gen)
        for seq, real, tok in zip(self.seqs, self.real, tokens.tolist(), strict=True):
            seq += tok
            real += [True] * width
        if self.enc_dec:
            out = self.model.decode(tokens, None, None, cache=self.cache, need_weights=need_weights)
            full = self.model(self.src[self.sent], torch.tensor(self.seqs))
        else:
            out = self.model(tokens, cache=self.cache, need_weights=need_weights)
            full = self.model(torch.tensor(self.seqs), torch.tensor(self.real))
        out = out[0] if need_weights else out
        torch.testing.assert_close(out, full[:, -width:], atol=1e-5, rtol=1e-5)


@torch.no_grad()
@pytest.mark.parametrize("share_prefixes", [True, False])
@pytest.mark.parametrize("arch,changes", [
    ("encoder-decoder", dict(n_kv_heads=2)),
    ("encoder-decoder", dict(attention_impl="textbook")),
    ("encoder-decoder", dict(d_k=4)),  # queries and keys narrower than values (Table 3 (B))
    ("decoder", dict(positional="rope", n_kv_heads=2, norm="rmsnorm", norm_position="pre", activation="swiglu")),
    ("decoder", dict(positional="rope", d_k=6)),
    # T5's relative bias: each cached key's position (flat rows with padding, prefix-tree cells)
    # against the new query's; 8 buckets up to distance 12, so 40 steps cross every bucket kind.
    ("encoder-decoder", dict(T5_LAYOUT, attention_impl="textbook")),
    ("encoder-decoder", dict(T5_LAYOUT, d_v=6, d_k=6)),
    ("decoder", dict(T5_LAYOUT, scale_attention=True)),
])
def test_cache_equals_full_recompute_through_beam_reorders(arch, changes, share_prefixes):
    # 40 steps cross the storage's growth boundaries; rows are repeated into groups of G beams
    # sharing a source, beams move to random parents, a sentence is dropped, a step feeds two
    # tokens and one asks for weights (both flatten a prefix tree), groups form again, and a
    # general reorder ends the groups. (With autograd on, the cache concatenates instead.)
    run = Scenario(tiny(arch, **changes), share_prefixes)
    cache, groups, buffers, copies = run.cache, [0, 1, 2], set(), 0
    for step in range(1, 41):
        kept = None if cache.layers[0].buffers is None else cache.layers[0].buffers[0].data_ptr()
        if step == 1:  # one row per sentence -> G beams each
            run.reorder([r for r in range(3) for _ in range(G)], group_size=G)
        elif step == 12:  # sentence 1 stops: its group leaves
            groups = [0, 2]
            run.reorder(run.parents(groups), group_size=G, sources=torch.tensor(groups))
            groups = [0, 1]
        elif step == 30:  # any row from anywhere: back to one source per row
            run.reorder([3, 0, 1, 1, 5])
            groups = None
        elif groups is not None:
            run.reorder(run.parents(groups), group_size=G)
        run.step(width=2 if step == 20 else 1, need_weights=step == 25)
        tree = cache.ancestors is not None
        assert tree == (share_prefixes and 1 <= step < 30 and step not in (20, 25))
        if tree:  # each beam's path holds exactly its real tokens, the new one included
            paths = cache.ancestors.sum(-1).view(-1).tolist()
            assert paths == [sum(r) for r in run.real]
            copies += cache.layers[0].buffers[0].data_ptr() != kept
        layer = cache.layers[0]
        assert layer.self_kv[0].data_ptr() == layer.buffers[0].data_ptr()  # a view of the in-place storage
        if run.enc_dec:
            assert layer.cross_kv[0].shape[0] == len(run.sent) // cache.group_size  # one entry per source
        if 2 <= step < 12:
            buffers.add(layer.buffers[0].data_ptr())
    assert cache.group_size == 1 and cache.ancestors is None
    if share_prefixes:
        assert copies < 12  # 24 tree steps: beam steps copy no keys/values, only compactions do
    else:
        assert len(buffers) == 2  # flat: every beam step copies, alternating between two sets of buffers


@torch.no_grad()
def test_prefix_tree_compacts_cells_no_beam_can_reach():
    run = Scenario(tiny(), share_prefixes=True)
    run.reorder([r for r in range(3) for _ in range(G)], group_size=G)
    run.step()
    for _ in range(30):
        run.reorder(run.parents([0, 1, 2]), group_size=G)
        run.step()
        ancestors = run.cache.ancestors  # (N, G, S)
        live = int(ancestors.any(dim=1).sum(dim=1).max())
        # Dead cells never outnumber live ones by more than a compaction's slack of 4G (+ G new).
        assert ancestors.shape[2] <= 2 * live + 5 * G
    assert ancestors.shape[2] < G * 31  # the beams share history: fewer cells than G per step


def flat(model):
    """The same model, whose caches keep every beam's history in its own row (no prefix tree)."""
    new_cache = model.new_cache

    def flat_cache():
        cache = new_cache()
        cache.share_prefixes = False
        return cache

    model.new_cache = flat_cache
    return model


@pytest.mark.parametrize("arch,t5", [("encoder-decoder", False), ("decoder", False), ("encoder-decoder", True),
                                     ("decoder", True)])
def test_beam_search_with_prefix_tree_equals_flat_cache(arch, t5, monkeypatch):
    grown = []
    grow_tree = KVCache.grow_tree
    monkeypatch.setattr(KVCache, "grow_tree", lambda self: grown.append(1) or grow_tree(self))
    sources = [[5, 6, 7, 8, 9, 3], [11, 12, 3], [13, 3], [14, 15, 4, 5, 6, 7, 8, 3]]
    kw = dict(beam_size=4, max_len_a=1, max_len_b=12, n_best=3, return_scores=True, length_penalty=1.0,
              length_penalty_kind="power")
    for eos_bias in (0.0, 2.5):  # outputs of the maximum length, and sentences ending at their own </s>
        layout = dict(T5_LAYOUT, relative_bias=dict(buckets=4, max_distance=6)) if t5 else \
            dict(positional="rope" if arch == "decoder" else "sinusoidal")
        model = tiny(arch, vocab=16, output_bias=True, **layout)
        with torch.no_grad():
            model.lm_head.bias[3] = eos_bias
        ids, scores = T.beam_search(model, sources, **kw)
        grown_tree = len(grown)
        flat_ids, flat_scores = T.beam_search(flat(model), sources, **kw)
        assert grown_tree > 0 and len(grown) == grown_tree  # the first search used the tree, the second did not
        assert torch.equal(ids, flat_ids)
        at_max = (ids[:, 0] != 0).sum(-1) == torch.tensor([len(s) + 12 for s in sources])
        assert eos_bias == 0.0 or not at_max.all()  # with the bias some sentences end early
        torch.testing.assert_close(scores, flat_scores, atol=1e-5, rtol=1e-5)
        grown.clear()
