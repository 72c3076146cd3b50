"""What the Hugging Face parity tests share (test_hf_*.py, test_import_hf.py).

Every check builds a random Hugging Face model from a config (nothing downloaded), perturbs
all its weights (so zero biases and unit norms cannot hide a mapping error), and compares
outputs in fp32 on right-padded batches with attention masks. Importing this module skips the
importing test module when transformers is not installed.
"""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")


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


def marian_logits(hf_model, src, src_mask, tgt, tgt_mask):
    with torch.no_grad():
        return hf_model(input_ids=src, attention_mask=src_mask.long(), decoder_input_ids=tgt,
                        decoder_attention_mask=tgt_mask.long()).logits


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
