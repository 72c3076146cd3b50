"""`transformer import-hf`: a Hugging Face directory (weights, tokenizer, chat template) becomes
a model directory of ours with the same outputs.
"""

from __future__ import annotations

import torch

from tests.interop.hf_common import (
    assert_rel_close,
    gpt2_model,
    llama_model,
    lm_logits,
    right_padded,
    transformers,
)
from transformer.interop.hf import from_hf  # noqa: E402


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
