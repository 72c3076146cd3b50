"""Hugging Face parity on the device: tests/interop's random tiny HF models (built offline, every
weight perturbed) imported with our importer, both moved to the device, and their fp32 outputs
compared on right-padded batches with attention masks; the builders and batches are tests/interop's
own.

Tolerance 1e-4 of the largest logit, as tests/interop's CPU tests (T5's there: 1e-5): on the
device both run torch's fp32 kernels, which agree to ~1e-6.
"""

from __future__ import annotations

import pytest
import torch

from tests.interop.hf_common import assert_rel_close, lm_logits, marian_logits, right_padded
from tests.interop.test_hf_bert import bert_batch, bert_model
from tests.interop.test_hf_gpt2_llama import DECODERS
from tests.interop.test_hf_marian import marian_batch, marian_model
from tests.interop.test_hf_t5 import T5_LAYOUTS, t5_batch, t5_model
from transformer.interop.hf import from_hf

pytestmark = pytest.mark.cuda

TOL = 1e-4


def on(device, *tensors: torch.Tensor) -> list[torch.Tensor]:
    return [t.to(device) for t in tensors]


def imported(hf_model, device) -> tuple[torch.nn.Module, torch.nn.Module]:
    """Our import of hf_model (made on the CPU), then both on the device."""
    model = from_hf(hf_model)
    return hf_model.to(device), model.to(device)


@pytest.mark.parametrize("cls_name", ["BertForMaskedLM", "BertForSequenceClassification"])
def test_bert_on_the_device_matches_hf(cls_name, device):
    act = "gelu_new" if cls_name == "BertForMaskedLM" else "gelu"
    hf_model, model = imported(bert_model(cls_name, hidden_act=act), device)
    ids, mask, types = on(device, *bert_batch())
    with torch.no_grad():
        out = hf_model(
            input_ids=ids,
            attention_mask=mask.long(),
            token_type_ids=types,
            output_hidden_states=True,
        )
        hidden = model(ids, mask, types)
        head = (
            model.mlm_head(hidden)[mask] if cls_name == "BertForMaskedLM" else model.pooler(hidden)
        )
    assert hidden.device.type == device.type
    assert_rel_close(hidden[mask], out.hidden_states[-1][mask], TOL)
    assert_rel_close(head, out.logits[mask] if cls_name == "BertForMaskedLM" else out.logits, TOL)


@pytest.mark.parametrize("name", list(DECODERS))
def test_decoder_on_the_device_matches_hf(name, device):
    hf_model, model = imported(DECODERS[name](), device)
    ids, mask = on(device, *right_padded([11, 6, 9], hf_model.config.vocab_size, pad=0, seed=3))
    theirs = lm_logits(hf_model, ids, mask)
    with torch.no_grad():
        ours = model(ids, mask)
    assert ours.device.type == device.type
    assert_rel_close(ours[mask], theirs[mask], TOL)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {
            "activation_function": "relu",
            "share_encoder_decoder_embeddings": False,
            "decoder_vocab_size": 61,
        },
    ],
    ids=["shared", "separate-embeddings"],
)
def test_marian_on_the_device_matches_hf_with_and_without_the_cache(changes, device):
    hf_model, model = imported(marian_model(**changes), device)
    src, src_mask, tgt, tgt_mask = on(device, *marian_batch(60))
    theirs = marian_logits(hf_model, src, src_mask, tgt, tgt_mask)
    with torch.no_grad():
        ours = model(src, tgt, src_mask, tgt_mask)
    assert ours.device.type == device.type
    assert_rel_close(ours[tgt_mask], theirs[tgt_mask], TOL)
    # Step by step over our KV cache on the device: Marian's teacher-forced logits.
    full = marian_logits(hf_model, src, src_mask, tgt, torch.ones_like(tgt_mask))
    with torch.no_grad():
        memory, memory_mask = model.encode(src, src_mask)
        cache = model.new_cache()
        steps = [model.decode(tgt[:, :1], memory, memory_mask, cache=cache)]
        steps += [
            model.decode(tgt[:, t : t + 1], None, None, cache=cache) for t in range(1, tgt.shape[1])
        ]
    assert_rel_close(torch.cat(steps, dim=1), full, TOL)


@pytest.mark.parametrize("layout", list(T5_LAYOUTS))
def test_t5_on_the_device_matches_hf(layout, device):
    hf_model, model = imported(t5_model(**T5_LAYOUTS[layout]), device)
    src, src_mask, tgt, tgt_mask = on(device, *t5_batch())
    theirs = marian_logits(hf_model, src, src_mask, tgt, tgt_mask)
    with torch.no_grad():
        ours = model(src, tgt, src_mask, tgt_mask)
    assert ours.device.type == device.type
    assert_rel_close(ours[tgt_mask], theirs[tgt_mask], TOL)
