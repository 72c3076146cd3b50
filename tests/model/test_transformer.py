"""The three model families: size, causality, padding, the KV cache, gradients, learning."""

import pytest
import torch

import transformer
from transformer.config import cpu_tiny, paper_base
from transformer.model.transformer import DecoderOnly, EncoderDecoder, EncoderOnly

V = 40


def tiny(arch="encoder-decoder", **changes):
    torch.manual_seed(0)
    return transformer.build_model(cpu_tiny(vocab_size=V, arch=arch, **changes)).eval()


def rand_ids(*shape, low=4):
    return torch.randint(low, V, shape)


def test_paper_base_parameter_count():
    """Base model, shared 37k vocabulary, embeddings tied three ways (§3.4).

    Attention 4·(512² + 512) = 1,050,624; FFN 2·512·2048 + 2048 + 512 = 2,099,712; LayerNorm
    2·512. Encoder layer: attention + FFN + 2 norms; decoder layer: 2 attentions + FFN + 3 norms
    (post-norm, no final norm). 12 layers = 44,138,496, plus one 37,000 x 512 embedding matrix
    (18,944,000) shared by source, target and output (no output bias) = 63,082,496.
    The paper's Table 3 says 65M for base; it does not give its exact vocabulary, and the same
    architecture reaches 65M with a shared vocabulary of about 40.7k (or untied embeddings at ~20k).
    """
    model = transformer.build_model(paper_base(vocab_size=37000))
    attention = 4 * (512 * 512 + 512)
    ffn = 2 * 512 * 2048 + 2048 + 512
    norm = 2 * 512
    encoder = 6 * (attention + ffn + 2 * norm)
    decoder = 6 * (2 * attention + ffn + 3 * norm)
    embedding = 37000 * 512
    assert transformer.count_parameters(model) == encoder + decoder + embedding == 63_082_496
    assert model.lm_head.weight is model.decoder.embed.tokens.weight is model.encoder.embed.tokens.weight


def test_separate_vocabularies_tie_only_target_side():
    cfg = cpu_tiny(vocab_size=30, tgt_vocab_size=50)
    model = transformer.build_model(cfg)
    assert model.encoder.embed.tokens.weight.shape[0] == 30
    assert model.lm_head.weight is model.decoder.embed.tokens.weight
    assert model(torch.randint(4, 30, (2, 5)), torch.randint(4, 50, (2, 4))).shape == (2, 4, 50)


def test_t5_layout_shares_inputs_unties_output_and_folds_the_score_scale_into_init():
    cfg = cpu_tiny(vocab_size=V, positional="t5_bias", norm="rmsnorm", norm_position="pre", bias=False,
                   activation="geglu_tanh", scale_embedding=False, scale_attention=False, tie_embeddings=False,
                   share_embeddings=True, n_heads=3, d_k=8, d_v=8, scale_output=True)
    torch.manual_seed(0)
    model = transformer.build_model(cfg)
    assert model.encoder.embed.tokens.weight is model.decoder.embed.tokens.weight
    assert model.lm_head.weight is not model.decoder.embed.tokens.weight
    assert model.encoder.relative.bidirectional and not model.decoder.relative.bidirectional
    attn = model.encoder.layers[0].self_attn
    assert attn.out_proj.weight.shape == (cfg.d_model, 3 * 8) and attn.scale == 1.0
    torch.manual_seed(0)
    scaled = transformer.build_model(cfg.replace(scale_attention=True))
    torch.testing.assert_close(attn.q_proj.weight, scaled.encoder.layers[0].self_attn.q_proj.weight / 8 ** 0.5)
    assert model.encoder.layers[0].feed_forward.w3 is not None  # gated
    src, tgt = rand_ids(2, 6), rand_ids(2, 5)
    hidden = model.decoder(tgt, None, *model.encode(src))
    torch.testing.assert_close(model(src, tgt), model.lm_head(hidden * cfg.d_model ** -0.5))  # scale_output


@pytest.mark.parametrize("impl", ["fused", "textbook"])
@pytest.mark.parametrize("positional", ["sinusoidal", "learned", "rope", "t5_bias"])
def test_encoder_decoder_is_causal(impl, positional):
    model = tiny(attention_impl=impl, positional=positional)
    src, tgt = rand_ids(2, 6), rand_ids(2, 8)
    base = model(src, tgt)
    for t in (0, 3, 7):
        changed = tgt.clone()
        changed[:, t:] = rand_ids(2, 8 - t)
        out = model(src, changed)
        torch.testing.assert_close(out[:, :t], base[:, :t], atol=1e-6, rtol=0)
        assert not torch.allclose(out[:, t:], base[:, t:])


@pytest.mark.parametrize("impl", ["fused", "textbook"])
def test_decoder_only_is_causal(impl):
    model = tiny("decoder", attention_impl=impl, positional="rope", n_kv_heads=2)
    ids = rand_ids(3, 9)
    base = model(ids)
    for t in (1, 5):
        changed = ids.clone()
        changed[:, t:] = rand_ids(3, 9 - t)
        torch.testing.assert_close(model(changed)[:, :t], base[:, :t], atol=1e-6, rtol=0)


@pytest.mark.parametrize("positional", ["sinusoidal", "t5_bias"])
def test_encoder_decoder_padding_invariance(positional):
    model = tiny(norm_position="pre", positional=positional)
    src, tgt = rand_ids(1, 5), rand_ids(1, 4)
    alone = model(src, tgt)
    # The same sentence in a batch with a longer one: extra source and target padding.
    src_b = torch.zeros(2, 9, dtype=torch.long)
    src_b[0, :5], src_b[1] = src[0], rand_ids(9)
    tgt_b = torch.zeros(2, 7, dtype=torch.long)
    tgt_b[0, :4], tgt_b[1] = tgt[0], rand_ids(7)
    tgt_mask = torch.tensor([[True] * 4 + [False] * 3, [True] * 7])
    batched = model(src_b, tgt_b, tgt_mask=tgt_mask)
    torch.testing.assert_close(batched[0, :4], alone[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("positional", ["learned", "rope", "t5_bias"])
def test_decoder_only_padding_invariance(side, positional):
    model = tiny("decoder", positional=positional)
    ids = rand_ids(1, 5)
    alone = model(ids)
    padded = torch.zeros(1, 8, dtype=torch.long)
    mask = torch.zeros(1, 8, dtype=torch.bool)
    real = slice(0, 5) if side == "right" else slice(3, 8)
    padded[0, real], mask[0, real] = ids[0], True
    out = model(padded, attention_mask=mask)
    torch.testing.assert_close(out[0, real], alone[0], atol=1e-5, rtol=1e-5)
    assert not out.isnan().any()


def test_encoder_only_padding_invariance_and_heads():
    model = tiny("encoder", n_token_types=2, embedding_norm=True, activation="gelu", mlm_head=True,
                 pooler=True, n_classes=3, positional="learned", scale_embedding=False)
    assert isinstance(model, EncoderOnly)
    ids = rand_ids(1, 6)
    alone = model(ids)
    padded = torch.cat([ids, torch.zeros(1, 3, dtype=torch.long)], 1)
    mask = padded != 0
    out = model(padded, attention_mask=mask)
    torch.testing.assert_close(out[:, :6], alone, atol=1e-5, rtol=1e-5)
    assert model.mlm_head(out).shape == (1, 9, V)
    assert model.pooler(out).shape == (1, 3)
    assert model.mlm_head.decoder.weight is model.encoder.embed.tokens.weight


def incremental(model, prompt_len, ids, mask=None, src=None):
    """Logits from a prefill of prompt_len positions, then one position per step, on the KV cache."""
    cache = model.new_cache()
    if isinstance(model, EncoderDecoder):
        memory, src_mask = model.encode(src)
        outs = [model.decode(ids[:, :prompt_len], memory, src_mask, cache=cache)]
        step = lambda t: model.decode(ids[:, t:t + 1], None, None, cache=cache)
    else:
        outs = [model(ids[:, :prompt_len], None if mask is None else mask[:, :prompt_len], cache=cache)]
        step = lambda t: model(ids[:, t:t + 1], cache=cache)
    outs += [step(t) for t in range(prompt_len, ids.shape[1])]
    return torch.cat(outs, 1)


@pytest.mark.parametrize("positional", ["sinusoidal", "learned", "rope", "none"])
@pytest.mark.parametrize("prompt_len", [1, 3])
def test_kv_cache_equals_full_forward_encoder_decoder(positional, prompt_len):
    model = tiny(positional=positional, n_kv_heads=2)
    src = rand_ids(3, 7)
    src[1, 4:] = 0  # padded sources
    src[2, 2:] = 0
    tgt = rand_ids(3, 8)
    full = model(src, tgt)
    torch.testing.assert_close(incremental(model, prompt_len, tgt, src=src), full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("positional", ["sinusoidal", "learned", "rope", "none"])
@pytest.mark.parametrize("impl", ["fused", "textbook"])
def test_kv_cache_equals_full_forward_decoder_only(positional, impl):
    model = tiny("decoder", positional=positional, attention_impl=impl, norm="rmsnorm", activation="swiglu",
                 norm_position="pre", n_kv_heads=1)
    ids = rand_ids(3, 9)
    mask = torch.ones(3, 9, dtype=torch.bool)
    mask[1, :2] = False  # left-padded prompts
    mask[2, :4] = False
    full = model(ids, attention_mask=mask)
    inc = incremental(model, 5, ids, mask)
    torch.testing.assert_close(inc[mask], full[mask], atol=1e-5, rtol=1e-5)


def test_decoder_only_last_only_equals_last_position():
    model = tiny("decoder")
    ids = rand_ids(2, 5)
    mask = torch.ones(2, 5, dtype=torch.bool)
    mask[1, :2] = False
    torch.testing.assert_close(model(ids, mask, last_only=True), model(ids, mask)[:, -1:])


def test_cache_reorder_selects_rows():
    model = tiny("decoder")
    ids = rand_ids(3, 6)
    cache = model.new_cache()
    model(ids[:, :4], cache=cache)
    cache.reorder(torch.tensor([2, 2, 0]))
    step = model(ids[[2, 2, 0], 4:5], cache=cache)
    full = model(ids[[2, 2, 0], :5])
    torch.testing.assert_close(step[:, 0], full[:, 4], atol=1e-5, rtol=1e-5)


def test_attention_weights_are_returned_per_layer_and_head():
    model = tiny()
    src, tgt = rand_ids(2, 5), rand_ids(2, 4)
    src[1, 3:] = 0
    memory, src_mask, enc_w = model.encode(src, need_weights=True)
    logits, weights = model.decode(tgt, memory, src_mask, need_weights=True)
    torch.testing.assert_close(logits, model(src, tgt), atol=1e-5, rtol=1e-5)
    assert len(enc_w) == 2 and enc_w[0].shape == (2, 4, 5, 5)
    assert len(weights["self"]) == 2 and weights["self"][0].shape == (2, 4, 4, 4)
    assert weights["cross"][1].shape == (2, 4, 4, 5)
    assert (weights["self"][0].triu(1) == 0).all()
    assert (weights["cross"][0][1, :, :, 3:] == 0).all()


@pytest.mark.parametrize("arch,positional", [("encoder-decoder", "learned"), ("decoder", "learned"),
                                             ("encoder", "learned"), ("encoder-decoder", "t5_bias")])
def test_every_parameter_gets_a_gradient(arch, positional):
    extra = dict(mlm_head=True, pooler=True, n_classes=2, n_token_types=2, embedding_norm=True) if arch == "encoder" else {}
    if positional == "t5_bias":  # the relative bias tables, the gate of a gated FFN, a separate output layer
        extra = dict(activation="geglu_tanh", tie_embeddings=False, share_embeddings=True, scale_attention=False)
    model = tiny(arch, positional=positional, dropout=0.1, **extra).train()
    ids = rand_ids(2, 6)
    if arch == "encoder-decoder":
        loss = model(ids, ids).sum()
    elif arch == "decoder":
        loss = model(ids).sum()
    else:
        hidden = model(ids, token_type_ids=torch.ones_like(ids))
        loss = model.mlm_head(hidden).sum() + model.pooler(hidden).sum()
    loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert not missing


@pytest.mark.parametrize("arch", ["encoder-decoder", "decoder"])
def test_tiny_model_overfits_one_batch(arch):
    torch.manual_seed(0)
    model = transformer.build_model(cpu_tiny(vocab_size=V, arch=arch, norm_position="pre")).train()
    src = rand_ids(4, 8)
    tgt_in = torch.cat([torch.full((4, 1), 2), src[:, :-1]], 1)  # teacher forcing on a copy task
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(150):
        logits = model(src, tgt_in) if arch == "encoder-decoder" else model(src)
        target = src if arch == "encoder-decoder" else torch.roll(src, -1, 1)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), target.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05


def test_bf16_forward_has_no_nan_with_fully_masked_rows():
    model = tiny("decoder").to(torch.bfloat16)
    ids = rand_ids(2, 6)
    mask = torch.tensor([[False, False, True, True, True, True], [True] * 6])
    out = model(ids, attention_mask=mask)
    assert not out.isnan().any()


def test_out_of_vocabulary_id_is_a_clear_error():
    model = tiny()
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model(torch.tensor([[5, V + 3]]), torch.tensor([[2]]))


def test_too_long_input_is_a_clear_error():
    model = tiny("decoder", max_positions=8, positional="learned")
    with pytest.raises(ValueError, match="max_positions=8"):
        model(rand_ids(1, 9))


def test_decoder_only_has_no_cross_attention():
    model = tiny("decoder")
    assert isinstance(model, DecoderOnly)
    assert all(layer.cross_attn is None for layer in model.decoder.layers)


def test_inference_linear_pads_rows_to_few_shapes_and_keeps_each_rows_result():
    from transformer.model import linear as linear_module
    from transformer.model.linear import linear
    from transformer.runtime.onednn import row_bucket, set_row_buckets

    assert linear_module.set_row_buckets is set_row_buckets  # the old name still works
    assert [row_bucket(n) for n in (0, 1, 16, 17, 33, 65, 129, 256, 257, 1000, 4000)] == [
        0, 1, 16, 18, 36, 72, 144, 256, 320, 1024, 4032]
    assert len({row_bucket(n) for n in range(1, 257)}) == 48  # a decoding step's rows: few shapes
    assert all(row_bucket(n) - n < n / 8 for n in range(1, 257))  # padding: under 1/8 of the rows
    assert len({row_bucket(n) for n in range(257, 4097)}) == 60  # a prefill's tokens: few shapes
    torch.manual_seed(0)
    layer = torch.nn.Linear(256, 300)
    previous = set_row_buckets(True)
    try:
        for rows in (1, 5, 130, 300, 700):
            x = torch.randn(rows, 256)
            with torch.no_grad():
                fast = linear(layer, x.view(1, rows, 256))
            assert fast.shape == (1, rows, 300)
            torch.testing.assert_close(fast[0], layer(x).detach(), atol=1e-5, rtol=1e-5)
    finally:
        set_row_buckets(previous)


def test_inference_linear_equals_plain_linear():
    from transformer.model import linear as linear_module
    from transformer.model.linear import linear, set_onednn_linear

    torch.manual_seed(0)
    layer = torch.nn.Linear(256, 384)  # large enough for the oneDNN path
    x = torch.randn(3, 7, 256)
    xt = torch.randn(3, 256, 7).transpose(1, 2)  # not contiguous
    for inp in (x, xt, x[:, :1], torch.randn(0, 1, 256)):
        with torch.no_grad():
            fast = linear(layer, inp)
        torch.testing.assert_close(fast, layer(inp).detach(), atol=1e-5, rtol=1e-5)
    assert linear(layer, x).requires_grad  # with autograd on: the plain path
    if linear_module._enabled:  # the oneDNN path ran, with a packed copy of the weight
        assert layer in linear_module._packed
    # The packed copy of the weight follows the weight: in-place updates and a new Parameter.
    with torch.no_grad():
        layer.weight.mul_(-2.0)
        torch.testing.assert_close(linear(layer, x), layer(x), atol=1e-5, rtol=1e-5)
        layer.weight = torch.nn.Parameter(torch.randn(384, 256))
        torch.testing.assert_close(linear(layer, x), layer(x), atol=1e-5, rtol=1e-5)
        layer.load_state_dict({"weight": torch.randn(384, 256), "bias": torch.randn(384)})
        torch.testing.assert_close(linear(layer, x), layer(x), atol=1e-5, rtol=1e-5)
    with torch.inference_mode():  # weights made in inference mode have no version: used as they are
        frozen = torch.nn.Linear(256, 384)
        torch.testing.assert_close(linear(frozen, x), frozen(x), atol=1e-5, rtol=1e-5)
    model = tiny(d_model=256, d_ff=512, n_heads=4)
    src, tgt = rand_ids(2, 6), rand_ids(2, 5)
    src[1, 3:] = 0
    with torch.no_grad():
        fast = model(src, tgt)
        previous = set_onednn_linear(False)
        try:
            plain = model(src, tgt)
        finally:
            set_onednn_linear(previous)
    torch.testing.assert_close(fast, plain, atol=1e-5, rtol=1e-5)
