"""Hugging Face interop, BERT: the encoder and its heads against transformers' Bert* models.
"""

from __future__ import annotations

import pytest
import torch

from tests.interop.hf_common import (
    assert_rel_close,
    perturb,
    right_padded,
    transformers,
)
from transformer.interop.hf import HFConversionError, from_hf, to_hf  # noqa: E402


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


CLASSES = ["BertModel", "BertForMaskedLM", "BertForSequenceClassification", "BertForPreTraining",
           "BertForQuestionAnswering"]


@pytest.mark.parametrize("cls_name", CLASSES)
def test_bert_outputs_match_hf(cls_name):
    hf_model = bert_model(cls_name, hidden_act="gelu_new" if cls_name == "BertForMaskedLM" else "gelu",
                          **({"num_labels": 2} if cls_name == "BertForQuestionAnswering" else {}))
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
        if cls_name == "BertForQuestionAnswering":
            start, end = model.spans(ids, mask, types)
            assert_rel_close(start[mask], out.start_logits[mask])
            assert_rel_close(end[mask], out.end_logits[mask])


@pytest.mark.parametrize("cls_name", CLASSES)
def test_bert_round_trip_reproduces_outputs(cls_name):
    hf_model = bert_model(cls_name, **({"num_labels": 2} if cls_name == "BertForQuestionAnswering" else {}))
    back = to_hf(from_hf(hf_model))
    assert type(back) is type(hf_model)
    ids, mask, types = bert_batch()
    with torch.no_grad():
        a = back(input_ids=ids, attention_mask=mask.long(), token_type_ids=types, output_hidden_states=True)
        b = hf_model(input_ids=ids, attention_mask=mask.long(), token_type_ids=types, output_hidden_states=True)
    assert_rel_close(a.hidden_states[-1][mask], b.hidden_states[-1][mask], 1e-6)
    if cls_name == "BertForQuestionAnswering":
        assert_rel_close(a.start_logits, b.start_logits, 1e-6)
        assert_rel_close(a.end_logits, b.end_logits, 1e-6)
    elif cls_name != "BertModel":
        first = a.logits if hasattr(a, "logits") else a.prediction_logits
        second = b.logits if hasattr(b, "logits") else b.prediction_logits
        assert_rel_close(first, second, 1e-6)


def test_bert_unsupported_fields_are_named():
    with pytest.raises(HFConversionError, match="hidden_act"):
        from_hf(bert_model("BertForMaskedLM", hidden_act="relu"))
    with pytest.raises(HFConversionError, match="BertForTokenClassification"):
        from_hf(bert_model("BertForTokenClassification"))


def test_a_sentence_head_is_refused_in_one_line():
    from transformer.model.build import build_model

    bert = from_hf(bert_model("BertModel")).config
    with pytest.raises(HFConversionError, match="sentence_head=True cannot be exported as BERT: a sentence head"):
        to_hf(build_model(bert.replace(sentence_head=True, pooler=False)))
