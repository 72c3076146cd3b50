"""Hugging Face interop, Marian: logits, round trip, cached decoding and refused fields against
transformers' MarianMTModel on random tiny models (hf_common.py says how).
"""

from __future__ import annotations

import pytest
import torch

from tests.interop.hf_common import (
    assert_rel_close,
    marian_logits,
    perturb,
    right_padded,
    transformers,
)
from transformer.interop.hf import HFConversionError, from_hf, to_hf  # noqa: E402


def marian_model(**changes):
    values = dict(vocab_size=61, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                  decoder_attention_heads=4, encoder_ffn_dim=48, decoder_ffn_dim=48, max_position_embeddings=64,
                  pad_token_id=60, decoder_start_token_id=60, eos_token_id=0, scale_embedding=True,
                  activation_function="swish")
    values.update(changes)
    torch.manual_seed(0)
    return perturb(transformers.MarianMTModel(transformers.MarianConfig(**values)))


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
