"""`transformer export --to hf`: transformers runs the exported directory as our Pipeline runs ours.

Each layout (Marian, GPT-2, Llama) gets random weights whose output layer cannot pick the 256
byte tokens, so greedy outputs are BPE words with spaces (a detokenization difference would
show), and whose </s> is favoured enough that some outputs end early and some run to the
length limit. transformers loads the directory with its own Auto classes (nothing of ours) and
must give the same text.
"""

import json
import re

import pytest
import torch

import transformer
from transformer.config import DecodeConfig, ModelConfig
from transformer.data.tokenizer import train_bpe
from transformer.decoding.pipeline import Pipeline
from transformer.export.common import ExportError
from transformer.export.targets import export_model

transformers = pytest.importorskip("transformers")

from transformer.export.hf import generation_config  # noqa: E402

SRC_TEXT = ["el gato se sentó en la alfombra", "un perro corrió en el parque", "hace sol hoy",
            "los pájaros cantan en los árboles", "la casa es grande y blanca"] * 20
TGT_TEXT = ["the cat sat on the mat", "a dog ran in the park", "the sun is warm today",
            "birds sing in the trees", "the house is big and white"] * 20
LINES = ["el gato corrió", "hace sol en el parque hoy", "los pájaros", "la casa grande y blanca en el parque"]
PROMPTS = ["the cat", "a dog ran in", "birds sing"]
DECODE = dict(beam_size=1, max_len_a=0.0, max_len_b=8, max_new_tokens=8)

BASE = dict(d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0, max_positions=64)
LAYOUTS = {
    "marian": dict(arch="encoder-decoder", norm_position="post", sinusoidal_layout="halves", final_norm=False,
                   output_bias=True),
    "gpt-2": dict(arch="decoder", norm_position="pre", positional="learned", activation="gelu_tanh",
                  scale_embedding=False),
    "llama": dict(arch="decoder", norm_position="pre", positional="rope", norm="rmsnorm", activation="swiglu",
                  bias=False, n_kv_heads=2, scale_embedding=False, tie_embeddings=False),
}


@pytest.fixture(scope="module")
def tokenizers():
    return train_bpe(SRC_TEXT + TGT_TEXT, vocab_size=320), train_bpe(SRC_TEXT, 300), train_bpe(TGT_TEXT, 290)


# How much to scale the </s> row of the output layer: picked so that some outputs end early and others later.
EOS_SCALE = {"marian": 3.0, "gpt-2": 1.0, "llama": 4.0}


def words_only(model, eos_id: int, eos_scale: float) -> None:
    """Random weights whose outputs are BPE merges (never a bare byte, ids 4-259), with </s> scaled."""
    head = model.lm_head
    with torch.no_grad():
        head.weight[4:260] = 0.0
        head.weight[eos_id] *= eos_scale
        if head.bias is not None:
            head.bias.zero_()
            head.bias[4:260] = -30.0


def model_dir(tmp_path, tokenizer, layout, target=None, name=None, eos_scale=None, decode=DECODE, **changes):
    """A saved model directory of `layout`; with `target`, separate source/target vocabularies."""
    vocab = dict(vocab_size=tokenizer.vocab_size)
    if target is not None:
        vocab["tgt_vocab_size"] = target.vocab_size
    cfg = ModelConfig(**{**BASE, **LAYOUTS[layout], **vocab, **changes})
    torch.manual_seed(0)
    model = transformer.build_model(cfg)
    words_only(model, cfg.eos_id, eos_scale or EOS_SCALE[layout])
    tok = tokenizer if target is None else (tokenizer, target)
    return transformer.save_model(model, tmp_path / (name or layout), tokenizer=tok, decode=DecodeConfig(**decode))


def hf_translate(out, lines, target_dir=None):
    """transformers' own translation: AutoTokenizer + AutoModelForSeq2SeqLM.generate (the translation pipeline's
    steps; transformers 5 removed that pipeline). Returns (texts, the HF tokenizer)."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(out)
    ids = model.generate(**tokenizer(lines, return_tensors="pt", padding=True))
    decoder = tokenizer if target_dir is None else transformers.AutoTokenizer.from_pretrained(target_dir)
    return decoder.batch_decode(ids, skip_special_tokens=True), tokenizer


def our_unstripped(pipe, lines):
    """Our greedy translations before translate's strip()."""
    ids = pipe.search(pipe.encode_sources(lines)[0], pipe.settings())
    return [pipe.target_tokenizer.decode(row) for row in ids.tolist()]


def test_marian_layout_translates_like_our_pipeline(tmp_path, tokenizers):
    path = model_dir(tmp_path, tokenizers[0], "marian")
    out = export_model(path, to="hf", out=tmp_path / "hf")
    pipe = Pipeline.load(path)
    ours = pipe.translate(LINES)
    theirs, tokenizer = hf_translate(out, LINES)
    assert [tokenizer(line).input_ids for line in LINES] == pipe.encode_sources(LINES)[0]  # no special tokens
    assert theirs == our_unstripped(pipe, LINES)
    assert [t.strip() for t in theirs] == ours
    assert all(ours) and len({len(t) for t in ours}) > 1  # BPE words, ending at different lengths
    if "translation" in transformers.pipelines.SUPPORTED_TASKS:  # transformers 4
        translate = transformers.pipeline("translation", model=str(out))
        assert [r["translation_text"] for r in translate(LINES)] == theirs
    g = transformers.GenerationConfig.from_pretrained(out)
    assert (g.decoder_start_token_id, g.eos_token_id, g.pad_token_id, g.suppress_tokens) == (2, 3, 0, [0])
    assert (g.num_beams, g.max_new_tokens, g.forced_eos_token_id) == (1, 8, None)
    files = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
            "README.md"} <= files
    readme = (out / "README.md").read_text()
    assert "AutoModelForSeq2SeqLM" in readme and "((5+|Y|)/6)^0.6" in readme


@pytest.mark.parametrize("layout, separate", [("marian", False), ("marian", True), ("gpt-2", False)])
def test_the_readme_code_runs_as_pasted(tmp_path, tokenizers, layout, separate, capsys):
    target = tokenizers[2] if separate else None
    source = tokenizers[1] if separate else tokenizers[0]
    path = model_dir(tmp_path, source, layout, target=target, tie_embeddings=not separate)
    out = export_model(path, to="hf", out=tmp_path / "hf")
    code = re.search(r"```python\n(.*?)```", (out / "README.md").read_text(), re.S).group(1)
    assert "DIR" not in code
    assert f'from_pretrained("{out.absolute()}' in code or f'model="{out.absolute()}"' in code  # the real path
    exec(code, {})  # as written in the README
    assert len(capsys.readouterr().out.splitlines()) == 1


def test_separate_vocabularies_decode_with_the_target_tokenizer(tmp_path, tokenizers):
    _, source, target = tokenizers
    path = model_dir(tmp_path, source, "marian", target=target, tie_embeddings=False)
    out = export_model(path, to="hf", out=tmp_path / "hf")
    theirs, _ = hf_translate(out, LINES, target_dir=out / "target_tokenizer")
    assert [t.strip() for t in theirs] == Pipeline.load(path).translate(LINES)
    assert "target_tokenizer" in (out / "README.md").read_text()


def test_beam_search_with_the_power_length_penalty_matches(tmp_path, tokenizers):
    """num_beams, early_stopping and length_penalty (|Y|^alpha) travel in generation_config.json."""
    outputs = []
    for alpha in (0.6, 2.0):
        decode = dict(DECODE, beam_size=4, length_penalty_kind="power", length_penalty=alpha, early_stopping="never")
        path = model_dir(tmp_path, tokenizers[0], "marian", name=f"beam-{alpha}", eos_scale=2.0, decode=decode)
        out = export_model(path, to="hf", out=tmp_path / f"hf-{alpha}")
        theirs, _ = hf_translate(out, LINES)
        outputs.append(Pipeline.load(path).translate(LINES))
        assert [t.strip() for t in theirs] == outputs[-1]
    assert outputs[0] != outputs[1]  # the penalty changes the outputs: it is carried, not ignored


@pytest.mark.parametrize("layout", ["gpt-2", "llama"])
def test_decoder_layouts_generate_like_our_pipeline(tmp_path, tokenizers, layout):
    path = model_dir(tmp_path, tokenizers[0], layout)
    out = export_model(path, to="hf", out=tmp_path / "hf")
    pipe = Pipeline.load(path)
    generate = transformers.pipeline("text-generation", model=str(out))
    assert type(generate.model).__name__ == {"gpt-2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM"}[layout]
    theirs = [generate(p, do_sample=False, return_full_text=False)[0]["generated_text"] for p in PROMPTS]
    ours = [pipe.generate(p, temperature=0) for p in PROMPTS]
    assert theirs == ours
    assert any(ours) and len({len(t) for t in ours}) > 1
    assert [generate.tokenizer(p).input_ids for p in PROMPTS] == [pipe.prompt_ids(p) for p in PROMPTS]  # <s> first
    g = generate.model.generation_config
    assert (g.do_sample, g.temperature, g.top_k, g.top_p, g.max_new_tokens) == (True, 1.0, 0, 1.0, 8)


def test_bert_layout_encoder_gives_our_hidden_states(tmp_path, tokenizers):
    bert = dict(arch="encoder", positional="learned", embedding_norm=True, activation="gelu", norm_position="post",
                n_token_types=2, scale_embedding=False, norm_eps=1e-12)
    cfg = ModelConfig(**{**BASE, **bert, "vocab_size": tokenizers[0].vocab_size})
    torch.manual_seed(0)
    model = transformer.build_model(cfg)
    path = transformer.save_model(model, tmp_path / "bert", tokenizer=tokenizers[0])
    out = export_model(path, to="hf", out=tmp_path / "hf")
    assert not (out / "generation_config.json").exists()
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    hf_model = transformers.BertModel.from_pretrained(out, add_pooling_layer=False)
    batch = tokenizer(LINES, return_tensors="pt", padding=True)
    with torch.no_grad():
        theirs = hf_model(**batch).last_hidden_state
        ours = model(batch.input_ids, batch.attention_mask.bool())
    mask = batch.attention_mask.bool()
    assert torch.allclose(ours[mask], theirs[mask], atol=1e-5)


def test_chat_template_goes_into_tokenizer_config(tmp_path, tokenizers):
    path = model_dir(tmp_path, tokenizers[0], "gpt-2")
    template = ("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>{% endfor %}"
                "{% if add_generation_prompt %}<s>assistant:{% endif %}")
    (path / "chat_template.json").write_text(json.dumps({"chat_template": template, "bos_token": "<s>",
                                                         "eos_token": "</s>"}))
    out = export_model(path, to="hf", out=tmp_path / "hf")
    assert json.loads((out / "tokenizer_config.json").read_text())["chat_template"] == template
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    pipe = Pipeline.load(path)
    messages = [{"role": "user", "content": "the cat"}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == pipe.apply_chat_template(messages)
    assert tokenizer(text, add_special_tokens=False).input_ids == pipe.prompt_ids("the cat", chat=True)


def test_generation_config_keeps_what_means_the_same():
    cfg = ModelConfig(vocab_size=300, d_model=32, n_heads=4, max_positions=64)
    wu = generation_config(cfg, DecodeConfig(beam_size=4, max_len_a=1.5, max_len_b=10, min_len=2))
    assert (wu.num_beams, wu.early_stopping, wu.min_new_tokens, wu.max_new_tokens) == (4, True, 2, 64)
    assert wu.length_penalty is None  # Wu's formula has no transformers equivalent: its default stays
    power = generation_config(cfg, DecodeConfig(beam_size=4, length_penalty_kind="power", length_penalty=0.8,
                                                early_stopping="never", max_len_a=0.0, max_len_b=20))
    assert (power.length_penalty, power.early_stopping, power.max_new_tokens) == (0.8, "never", 20)


def prenorm_model(tmp_path, tokenizers):
    """Our Bible recipe's model (runs/demo/averaged) when it exists, else a small one of its layout."""
    from pathlib import Path

    demo = Path(__file__).resolve().parents[2] / "runs" / "demo" / "averaged"
    if (demo / "config.json").is_file():
        return demo
    return model_dir(tmp_path, tokenizers[0], "marian", name="prenorm", norm_position="pre",
                     sinusoidal_layout="interleaved", final_norm=None, output_bias=False)


def test_prenorm_model_is_one_line_pointing_at_ct2_and_writes_nothing(tmp_path, tokenizers):
    path = prenorm_model(tmp_path, tokenizers)
    with pytest.raises(ExportError) as e:
        export_model(path, to="hf", out=tmp_path / "hf")
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"{path} cannot be exported to Hugging Face: ")
    assert "norm_position='pre'" in message and "Marian is post-norm" in message and "--to ct2" in message
    assert not (tmp_path / "hf").exists()


def test_non_empty_out_is_refused_and_left_untouched(tmp_path, tokenizers):
    path = model_dir(tmp_path, tokenizers[0], "gpt-2")
    out = tmp_path / "hf"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(ExportError, match="already exists and is not an empty directory"):
        export_model(path, to="hf", out=out)
    assert [p.name for p in out.iterdir()] == ["keep.txt"] and (out / "keep.txt").read_text() == "mine"
    (out / "keep.txt").unlink()
    assert export_model(path, to="hf", out=out) == out and (out / "config.json").is_file()  # empty is fine


def test_a_model_without_tokenizer_is_one_line(tmp_path, tokenizers):
    path = model_dir(tmp_path, tokenizers[0], "gpt-2")
    (path / "tokenizer.json").unlink()
    with pytest.raises(ExportError, match=r"has no tokenizer .*: a Hugging Face export needs one"):
        export_model(path, to="hf", out=tmp_path / "hf")
    assert not (tmp_path / "hf").exists()


def test_a_failure_while_writing_leaves_no_output(tmp_path, tokenizers, monkeypatch):
    from transformer.export import hf

    path = model_dir(tmp_path, tokenizers[0], "gpt-2")

    def broken(*args):
        raise OSError("disk full")

    monkeypatch.setattr(hf, "readme", broken)  # fails after the weights and tokenizer are written
    with pytest.raises(OSError, match="disk full"):
        export_model(path, to="hf", out=tmp_path / "out" / "hf")
    assert list((tmp_path / "out").iterdir()) == []  # neither `hf` nor its temporary directory
