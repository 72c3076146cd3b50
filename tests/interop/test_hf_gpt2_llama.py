"""Hugging Face interop, decoder-only: GPT-2 and Llama against transformers' models: logits,
round trip, RoPE's row permutation, greedy generation, refused fields.
"""

from __future__ import annotations

import pytest
import torch

from tests.interop.hf_common import (
    assert_rel_close,
    gpt2_model,
    greedy,
    llama_model,
    lm_logits,
    right_padded,
)
from transformer.interop.hf import HFConversionError, from_hf, to_hf  # noqa: E402

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
