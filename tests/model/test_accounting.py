"""Parameter and FLOP accounting, checked against torch's own FLOP counter."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import transformer
from transformer.config import cpu_tiny
from transformer.model.accounting import attention_flops


def test_attention_term_is_the_classic_formula():
    b, d, length = 3, 512, 100
    assert b * length * attention_flops(d, length) == 4 * b * d * length * (2 * d + length)


@pytest.mark.parametrize("arch", ["encoder-decoder", "decoder", "encoder"])
@pytest.mark.parametrize("activation, n_kv_heads, d_k, d_v", [("relu", None, None, None), ("swiglu", 2, None, None),
                                                              ("relu", 2, 6, None), ("geglu_tanh", None, 6, 6)])
def test_flops_per_token_matches_torch_flop_counter(arch, activation, n_kv_heads, d_k, d_v):
    # The textbook attention path is plain matmuls, which FlopCounterMode counts exactly.
    cfg = cpu_tiny(vocab_size=100, arch=arch, activation=activation, n_kv_heads=n_kv_heads, d_k=d_k, d_v=d_v,
                   attention_impl="textbook")
    model = transformer.build_model(cfg).eval()
    b, length = 2, 16
    ids = torch.randint(4, 100, (b, length))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(ids, ids) if arch == "encoder-decoder" else model(ids)
    flops = transformer.flops_per_token(cfg, length)
    assert counter.get_total_flops() == b * length * flops["forward"]
    assert flops["training"] == 3 * flops["forward"]


def test_tied_parameters_count_once():
    tied = transformer.build_model(cpu_tiny(vocab_size=1000))
    untied = transformer.build_model(cpu_tiny(vocab_size=1000, tie_embeddings=False))
    # Untied: separate source embedding, target embedding and output matrix.
    assert transformer.count_parameters(untied) - transformer.count_parameters(tied) == 2 * 1000 * 64
    assert transformer.count_parameters(tied) == sum(p.numel() for p in set(tied.parameters()))


@pytest.mark.parametrize("pooler", [False, True])
def test_flops_per_image_matches_torch_flop_counter(pooler):
    vision = {"image_size": 8, "patch_size": 4, "channels": 3}
    cfg = cpu_tiny(vocab_size=1, pad_id=0, bos_id=0, eos_id=0, arch="encoder", norm_position="pre", activation="gelu",
                   attention_impl="textbook",
                   vision=vision, n_classes=5, pooler=pooler)
    model = transformer.build_model(cfg).eval()
    images = torch.randn(2, 3, 8, 8)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model.pooler(model(images))
    flops = transformer.flops_per_image(cfg)
    assert counter.get_total_flops() == 2 * flops["forward"]
    assert flops["training"] == 3 * flops["forward"]
    assert flops["encoder"] == 5 * transformer.flops_per_token(cfg, 5)["encoder"]  # [CLS] + 4 patches
