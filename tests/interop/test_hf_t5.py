"""Hugging Face interop, T5: v1.0 (ReLU, tied output scaled by d_model^-1/2) and v1.1 (gated GELU,
untied, d_kv x heads != d_model) against transformers' T5ForConditionalGeneration: logits,
round trip, greedy and beam search, an imported T5 with its tokenizer.
"""

from __future__ import annotations

import pytest
import torch

import transformer  # noqa: E402
from tests.interop.hf_common import (
    assert_rel_close,
    marian_logits,
    right_padded,
    transformers,
)
from transformer.interop.hf import HFConversionError, from_hf, to_hf  # noqa: E402

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
