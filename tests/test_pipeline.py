"""Text in, text out: Pipeline and the translate / generate / evaluate commands."""

import json

import pytest
import torch

import transformer
from transformer.cli import main
from transformer.config import DecodeConfig, cpu_tiny
from transformer.data.tokenizer import train_bpe
from transformer.decoding.pipeline import Pipeline, PipelineError

TEXT = ["the cat sat on the mat", "a dog ran in the park", "the sun is warm today", "birds sing in the trees",
        "el gato se sentó", "un perro corrió en el parque", "hace sol hoy", "los pájaros cantan"] * 20


@pytest.fixture(scope="module")
def tokenizer():
    return train_bpe(TEXT, vocab_size=300)


def model_dir(tmp_path, tokenizer, arch, **decode):
    torch.manual_seed(0)
    model = transformer.build_model(cpu_tiny(vocab_size=tokenizer.vocab_size, arch=arch, max_positions=64))
    return transformer.save_model(model, tmp_path / arch, tokenizer=tokenizer, decode=DecodeConfig(**decode))


def test_translate_keeps_input_order_and_matches_one_at_a_time(tmp_path, tokenizer):
    pipe = Pipeline.load(model_dir(tmp_path, tokenizer, "encoder-decoder", beam_size=1, max_len_b=8))
    lines = ["the cat sat on the mat in the sun", "", "a dog", "los pájaros cantan hoy en el parque", "hace sol"]
    batched = pipe.translate(lines, batch_tokens=12)  # several batches, sorted by length internally
    assert batched[1] == ""
    for line, out in zip(lines, batched, strict=True):
        if line:
            ids = transformer.greedy_search(pipe.model, [tokenizer.encode(line)], max_len_a=1, max_len_b=8)
            assert out == tokenizer.decode(ids[0].tolist())
    assert pipe.translate(lines, beam_size=3) == [pipe.translate([line], beam_size=3)[0] for line in lines]
    n_best = pipe.translate(lines[:2], beam_size=3, n_best=2)
    assert len(n_best[0]) == 2 and n_best[1] == []


def test_translate_truncates_over_long_lines_and_rejects_language_models(tmp_path, tokenizer):
    pipe = Pipeline.load(model_dir(tmp_path, tokenizer, "encoder-decoder", beam_size=1, max_len_b=5))
    long = "the cat " * 60
    ids = tokenizer.encode(long)
    assert len(ids) > 64
    with pytest.raises(PipelineError, match="input line 2 has .* tokens, more than the model's max_positions=64"):
        pipe.translate(["ok", long], truncate=False)
    cut = []
    out = pipe.translate(["ok", long, "hace sol", long], on_truncate=cut.extend)
    assert cut == [2, 4] and len(out) == 4
    # the truncated line is translated as its first max_positions tokens
    expected = transformer.greedy_search(pipe.model, [ids[:64]], max_len_a=1, max_len_b=5)
    assert out[1] == out[3] == tokenizer.decode(expected[0].tolist())
    with pytest.warns(UserWarning, match=r"1 of 2 input lines had more than the model's max_positions=64 tokens "
                                         r"and were truncated to it \(line 2\)"):
        assert pipe.translate(["ok", long]) == out[:2]
    lm = Pipeline.load(model_dir(tmp_path, tokenizer, "decoder"))
    with pytest.raises(PipelineError, match="use generate"):
        lm.translate(["hello"])


def test_generate_greedy_sampling_and_chat(tmp_path, tokenizer):
    path = model_dir(tmp_path, tokenizer, "decoder")
    pipe = Pipeline.load(path)
    prompt = "the cat"
    assert pipe.prompt_ids(prompt) == [pipe.model.config.bos_id] + tokenizer.encode(prompt)
    greedy = pipe.generate(prompt, temperature=0, max_new_tokens=6)
    ids = transformer.greedy_search(pipe.model, [pipe.prompt_ids(prompt)], max_len_a=0, max_len_b=6)
    assert greedy == tokenizer.decode(ids[0].tolist())
    assert pipe.generate(prompt, seed=3, max_new_tokens=8) == pipe.generate(prompt, seed=3, max_new_tokens=8)
    with pytest.raises(PipelineError, match="no chat template"):
        pipe.generate(prompt, chat=True)
    template = "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>{% endfor %}{% if add_generation_prompt %}<s>assistant:{% endif %}"
    (path / "chat_template.json").write_text(json.dumps({"chat_template": template, "bos_token": "<s>", "eos_token": "</s>"}))
    chat = Pipeline.load(path)
    assert chat.apply_chat_template([{"role": "user", "content": "hi"}]) == "<s>user: hi</s><s>assistant:"
    assert chat.prompt_ids("hi", chat=True)[0] == chat.model.config.bos_id  # <s> in the template is the special token


def test_cli_translate_evaluate_generate(tmp_path, tokenizer, capsys):
    path = model_dir(tmp_path, tokenizer, "encoder-decoder", beam_size=2, max_len_b=6)
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("the cat sat\na dog ran\n", encoding="utf-8")
    ref.write_text("el gato\nun perro\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    assert main(["translate", str(path), "--input", str(src), "--output", str(out), "--beam", "1"]) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines == Pipeline.load(path).translate(["the cat sat", "a dog ran"], beam_size=1)
    assert main(["evaluate", str(path), "--src", str(src), "--ref", str(ref)]) == 0
    printed = capsys.readouterr().out
    assert "BLEU" in printed and "nrefs:1" in printed and "chrF2" in printed
    ref.write_text("one line\n", encoding="utf-8")
    assert main(["evaluate", str(path), "--src", str(src), "--ref", str(ref)]) == 2
    assert "--src has 2 lines but --ref has 1" in capsys.readouterr().err
    src.write_bytes(b"caf\xe9\n")
    assert main(["translate", str(path), "--input", str(src)]) == 2
    assert "line 1: invalid UTF-8" in capsys.readouterr().err

    lm = model_dir(tmp_path, tokenizer, "decoder")
    assert main(["generate", str(lm), "--prompt", "the cat", "--temperature", "0", "--max-new-tokens", "5"]) == 0
    assert capsys.readouterr().out.strip() == Pipeline.load(lm).generate("the cat", temperature=0, max_new_tokens=5).strip()
    text = tmp_path / "text.txt"
    text.write_text("the cat sat on the mat\nbirds sing\n", encoding="utf-8")
    assert main(["evaluate", str(lm), "--text", str(text)]) == 0
    assert capsys.readouterr().out.startswith("perplexity ")
    assert main(["generate", str(path), "--prompt", "x"]) == 2
    assert "use translate" in capsys.readouterr().err
