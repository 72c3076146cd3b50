"""`transformer export --to ct2`: the exported model computes what ours does, layout by layout.

Each layout is checked two ways on random weights: CTranslate2's per-token log-probabilities
of given sequences (`score_batch`) against ours, and whole decodes (greedy and beam 4 with the
|Y|^alpha length penalty both sides share) token for token. An output bias on </s> makes
hypotheses end at different lengths (it is tuned per model until greedy lengths differ), so
finishing, ranking and the length penalty are exercised, not just the maximum length.
"""

import json
import re

import pytest
import torch

import transformer
from transformer.config import DecodeConfig, ModelConfig
from transformer.data.tokenizer import train_bpe
from transformer.export.common import ExportError
from transformer.export.targets import export_model

ctranslate2 = pytest.importorskip("ctranslate2")

SRC_TEXT = ["el gato se sentó en la alfombra", "un perro corrió en el parque", "hace sol hoy",
            "los pájaros cantan en los árboles", "la casa es grande y blanca"] * 20
TGT_TEXT = ["the cat sat on the mat", "a dog ran in the park", "the sun is warm today",
            "birds sing in the trees", "the house is big and white"] * 20
LINES = ["el gato corrió", "hace sol en el parque hoy", "los pájaros", "la casa grande y blanca en el parque"]
MAX_LEN = 20


@pytest.fixture(scope="module")
def tokenizers():
    return train_bpe(SRC_TEXT + TGT_TEXT, vocab_size=320), train_bpe(SRC_TEXT, 300), train_bpe(TGT_TEXT, 290)


BASE = dict(d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0, max_positions=64)
ENCODER_DECODER = {
    "paper post-norm": dict(norm_position="post"),
    "pre-norm interleaved": dict(norm_position="pre", sinusoidal_layout="interleaved"),
    "marian halves, pad start": dict(norm_position="post", sinusoidal_layout="halves", decoder_start_id=0,
                                     tie_embeddings=False),
    "learned, gelu, no bias": dict(norm_position="pre", positional="learned", activation="gelu", bias=False),
    "rope, rmsnorm, swiglu, gqa": dict(norm_position="pre", positional="rope", norm="rmsnorm",
                                       activation="swiglu", n_kv_heads=2, norm_eps=1e-6),
    "separate vocabularies": dict(norm_position="pre", separate=True),
}
DECODER_ONLY = {
    "gpt-2 layout": dict(positional="learned", activation="gelu_tanh", tie_embeddings=True),
    "llama layout": dict(positional="rope", norm="rmsnorm", activation="swiglu", bias=False, n_kv_heads=2,
                         tie_embeddings=False),
}


def make_model(tmp_path, tokenizers, arch, changes):
    shared, src_tok, tgt_tok = tokenizers
    changes = dict(changes)
    separate = changes.pop("separate", False)
    vocab = dict(vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size) if separate else \
        dict(vocab_size=shared.vocab_size)
    base = dict(BASE, norm_position="pre") if arch == "decoder" else BASE
    cfg = ModelConfig(arch=arch, output_bias=True, **{**base, **vocab, **changes})
    torch.manual_seed(0)
    model = transformer.build_model(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():  # norms away from identity, so they are tested too
            if "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
        model.lm_head.bias.normal_(0, 0.5)
    tokenizer = (src_tok, tgt_tok) if separate else shared
    path = transformer.save_model(model, tmp_path / "model", tokenizer=tokenizer, decode=DecodeConfig())
    return model, path, (src_tok if separate else shared), (tgt_tok if separate else shared)


def end_at_different_lengths(model, sources) -> None:
    """Sharpen the </s> logit and raise its bias until greedy outputs end at different lengths."""
    cfg = model.config
    with torch.no_grad():
        model.lm_head.weight[cfg.eos_id] *= 6
        for bias in torch.linspace(-12, 8, 81).tolist():
            model.lm_head.bias[cfg.eos_id] = bias
            ids = transformer.greedy_search(model, sources, max_len_a=0, max_len_b=MAX_LEN)
            if len({int((row != cfg.pad_id).sum()) for row in ids}) >= 2:
                return
    raise AssertionError("no </s> bias makes these outputs end at different lengths")


def tokens_of(tokenizer, ids):
    return [tokenizer.tokenizer.id_to_token(i) for i in ids]


def ids_of(tokenizer, tokens):
    return [tokenizer.token_to_id(t) for t in tokens]


@pytest.mark.parametrize("layout", ENCODER_DECODER)
def test_encoder_decoder_exports_score_and_decode_like_ours(tmp_path, tokenizers, layout):
    model, path, src_tok, tgt_tok = make_model(tmp_path, tokenizers, "encoder-decoder", ENCODER_DECODER[layout])
    sources = [src_tok.encode(line) for line in LINES]
    end_at_different_lengths(model, sources)
    transformer.save_model(model, path)
    out = export_model(path, "ct2", tmp_path / "ct2")
    translator = ctranslate2.Translator(str(out), device="cpu", intra_threads=1)
    source_tokens = [tokens_of(src_tok, ids) for ids in sources]

    # Per-token log-probabilities of given targets (teacher forcing), </s> included.
    targets = [tgt_tok.encode(t) for t in TGT_TEXT[:len(LINES)]]
    scored = translator.score_batch(source_tokens, [tokens_of(tgt_tok, ids) for ids in targets])
    cfg = model.config
    for src, tgt, result in zip(sources, targets, scored, strict=True):
        dec_in = torch.tensor([[cfg.start_id] + tgt])
        with torch.no_grad():
            logp = model(torch.tensor([src]), dec_in).log_softmax(-1)[0]
        ours = logp.gather(-1, torch.tensor(tgt + [cfg.eos_id])[:, None])[:, 0]
        torch.testing.assert_close(torch.tensor(result.log_probs), ours, atol=2e-4, rtol=0)

    # Whole decodes, token for token: greedy, and beam 4 with |Y|^alpha counting </s> on both sides.
    max_len, lengths = MAX_LEN, set()
    for beam in (1, 4):
        ids = transformer.beam_search(model, sources, beam_size=beam, length_penalty=0.6, length_penalty_kind="power",
                                      max_len_a=0, max_len_b=max_len, n_best=1) if beam > 1 else \
            transformer.greedy_search(model, sources, max_len_a=0, max_len_b=max_len)
        ids = ids[:, 0] if ids.dim() == 3 else ids
        results = translator.translate_batch(source_tokens, beam_size=beam, length_penalty=0.6, return_end_token=True,
                                             max_decoding_length=max_len, min_decoding_length=0)
        for row, result in zip(ids.tolist(), results, strict=True):
            ours = [t for t in row if t not in (cfg.pad_id, cfg.eos_id)]
            theirs = [t for t in ids_of(tgt_tok, result.hypotheses[0]) if t != cfg.eos_id]
            assert theirs == ours, f"{layout}, beam {beam}"
            lengths.add(len(ours))
    assert len(lengths) > 1  # hypotheses ended at different lengths: </s> was really chosen


@pytest.mark.parametrize("layout", DECODER_ONLY)
def test_decoder_only_exports_score_and_generate_like_ours(tmp_path, tokenizers, layout):
    model, path, _, tok = make_model(tmp_path, tokenizers, "decoder", DECODER_ONLY[layout])
    cfg = model.config
    out = export_model(path, "ct2", tmp_path / "ct2")
    generator = ctranslate2.Generator(str(out), device="cpu", intra_threads=1)
    sequences = [[cfg.bos_id] + tok.encode(t) for t in TGT_TEXT[:4]]
    scored = generator.score_batch([tokens_of(tok, s) for s in sequences])
    for seq, result in zip(sequences, scored, strict=True):
        with torch.no_grad():
            logp = model(torch.tensor([seq])).log_softmax(-1)[0, :-1]
        ours = logp.gather(-1, torch.tensor(seq[1:])[:, None])[:, 0]
        torch.testing.assert_close(torch.tensor(result.log_probs), ours, atol=2e-4, rtol=0)

    prompts = [[cfg.bos_id] + tok.encode(p) for p in ("the cat", "birds sing in", "a")]
    for prompt in prompts:
        ours = transformer.sample(model, [prompt], max_new_tokens=12, top_k=1)[0].tolist()
        ours = [t for t in ours if t != cfg.pad_id]
        result = generator.generate_batch([tokens_of(tok, prompt)], max_length=12, sampling_topk=1,
                                          include_prompt_in_result=False)[0]
        theirs = result.sequences_ids[0]
        assert theirs == [t for t in ours[:len(theirs)]] and ours[len(theirs):] in ([], [cfg.eos_id])


def test_export_writes_vocabulary_tokenizer_readme_and_quantizes(tmp_path, tokenizers):
    _, path, _, tok = make_model(tmp_path, tokenizers, "encoder-decoder", ENCODER_DECODER["pre-norm interleaved"])
    out = export_model(path, "ct2", tmp_path / "int8", quantization="int8")
    assert json.loads((out / "config.json").read_text())["decoder_start_token"] == "<s>"
    vocab = json.loads((out / "shared_vocabulary.json").read_text())
    assert vocab == [tok.tokenizer.id_to_token(i) for i in range(len(vocab))]
    assert (out / "tokenizer.json").is_file() and (out / "decode.json").is_file()
    readme = (out / "README.md").read_text()
    assert "ctranslate2.Translator" in readme and "((5+|Y|)/6)" in readme
    translator = ctranslate2.Translator(str(out), device="cpu", compute_type="int8")
    assert translator.translate_batch([tokens_of(tok, tok.encode("hace sol"))], max_decoding_length=5)[0].hypotheses


def test_what_ct2_cannot_run_is_one_line_and_leaves_nothing(tmp_path, tokenizers):
    shared = tokenizers[0]
    encoder = transformer.build_model(ModelConfig(arch="encoder", vocab_size=shared.vocab_size, **BASE))
    path = transformer.save_model(encoder, tmp_path / "bert", tokenizer=shared)
    with pytest.raises(ExportError, match="arch='encoder' cannot be exported to CTranslate2.*--to hf"):
        export_model(path, "ct2", tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.*"))
    _, path, _, _ = make_model(tmp_path, tokenizers, "encoder-decoder", {"d_k": 4})
    with pytest.raises(ExportError, match="d_k=4 cannot be exported to CTranslate2"):
        export_model(path, "ct2", tmp_path / "out")
    _, path, _, _ = make_model(tmp_path, tokenizers, "encoder-decoder", {"positional": "t5_bias"})
    with pytest.raises(ExportError, match="positional='t5_bias' cannot be exported to CTranslate2.*--to hf"):
        export_model(path, "ct2", tmp_path / "out")
    _, path, _, _ = make_model(tmp_path, tokenizers, "encoder-decoder",
                               {"positional": "learned", "audio": {"n_mels": 8, "max_frames": 100}})
    with pytest.raises(ExportError, match="a speech model .* --to hf"):
        export_model(path, "ct2", tmp_path / "out")
    _, path, _, _ = make_model(tmp_path, tokenizers, "encoder-decoder", {})
    with pytest.raises(ExportError, match="quantization 'int3' is not one of"):
        export_model(path, "ct2", tmp_path / "out", quantization="int3")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    with pytest.raises(ExportError, match="already exists and is not an empty directory"):
        export_model(path, "ct2", tmp_path / "taken")
    assert [p.name for p in (tmp_path / "taken").iterdir()] == ["keep.txt"]
    with pytest.raises(ExportError, match="unknown export target 'onnx'"):
        export_model(path, "onnx", tmp_path / "out")


@pytest.mark.parametrize("arch", ["encoder-decoder", "decoder"])
def test_the_readme_code_runs_on_the_export(tmp_path, tokenizers, arch, capsys):
    layout = ENCODER_DECODER["separate vocabularies"] if arch == "encoder-decoder" else DECODER_ONLY["llama layout"]
    _, path, _, _ = make_model(tmp_path, tokenizers, arch, layout)
    out = export_model(path, "ct2", tmp_path / "ct2")
    code = re.search(r"```python\n(.*?)```", (out / "README.md").read_text(), re.S).group(1)
    assert "DIR" not in code and f'"{out.absolute()}' in code  # the real path, as pasted
    exec(code, {})  # as written in the README
    assert len(capsys.readouterr().out.splitlines()) == 1


def test_the_readme_names_a_relative_out_by_its_absolute_path(tmp_path, tokenizers, monkeypatch):
    _, path, _, _ = make_model(tmp_path, tokenizers, "encoder-decoder", {})
    monkeypatch.chdir(tmp_path)
    export_model(path, "ct2", "exports/ct2")
    readme = (tmp_path / "exports" / "ct2" / "README.md").read_text()
    assert f'ctranslate2.Translator("{tmp_path / "exports" / "ct2"}", device="cpu")' in readme
    assert f'from_file("{tmp_path / "exports" / "ct2" / "tokenizer.json"}")' in readme


def test_export_command(tmp_path, tokenizers, capsys):
    from transformer.cli import main

    _, path, _, _ = make_model(tmp_path, tokenizers, "encoder-decoder", {})
    assert main(["export", str(path), "--to", "ct2", "--out", str(tmp_path / "c"), "--quantization", "int8"]) == 0
    assert f"wrote {tmp_path / 'c'} (ct2)" in capsys.readouterr().out
    assert main(["export", str(path), "--to", "ct2", "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("transformer export: error: ") and "already exists" in err and len(err.splitlines()) == 1
