"""Export of models built here (not imported): what a user trained goes to transformers intact.
"""

from __future__ import annotations

import pytest
import torch

from tests.interop.hf_common import (
    assert_rel_close,
    lm_logits,
    marian_logits,
    right_padded,
)
from transformer.interop.hf import from_hf, to_hf  # noqa: E402


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
    "gpt2-like-no-bias": dict(arch="decoder", vocab_size=50, d_model=32, n_heads=4, n_decoder_layers=2, d_ff=48,
                      norm_position="pre", positional="learned", activation="gelu_tanh", scale_embedding=False, bias=False,
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
