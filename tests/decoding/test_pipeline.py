"""Text in, text out: Pipeline and the translate / generate / evaluate commands."""

import json
import os
import sys
import threading

import pytest
import torch

import transformer
from transformer.cli import main
from transformer.config import ConfigError, DecodeConfig, cpu_tiny
from transformer.data.tokenizer import train_bpe
from transformer.decoding.generate import sample_long
from transformer.decoding.inputs import PipelineError
from transformer.decoding.pipeline import Pipeline
from transformer.evaluation.metrics import bleu, chrf
from transformer.evaluation.scoring import text_perplexity

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


def test_n_best_is_the_beams_hypotheses_best_first(tmp_path, tokenizer):
    pipe = Pipeline.load(model_dir(tmp_path, tokenizer, "encoder-decoder", beam_size=1, max_len_b=8))
    lines = ["the cat sat on the mat in the sun", "", "hace sol"]
    n_best = pipe.translate(lines, beam_size=3, n_best=3)
    one_best = pipe.translate(lines, beam_size=3)
    assert n_best[1] == [] and one_best[1] == ""
    s = pipe.settings(beam_size=3)
    search = dict(beam_size=3, length_penalty=s.length_penalty, length_penalty_kind=s.length_penalty_kind,
                  max_len_a=s.max_len_a, max_len_b=s.max_len_b, early_stopping=s.early_stopping)
    for line, hyps, best in zip(lines, n_best, one_best, strict=True):
        if not line:
            continue
        src = [tokenizer.encode(line)]
        ids, scores = transformer.beam_search(pipe.model, src, n_best=3, return_scores=True, **search)
        rows = [[t for t in row if t != pipe.model.config.pad_id] for row in ids[0].tolist()]
        assert len({tuple(r) for r in rows}) == 3  # three different hypotheses
        assert torch.isfinite(scores).all() and scores[0].tolist() == sorted(scores[0].tolist(), reverse=True)
        assert hyps == [tokenizer.decode(r).strip() for r in rows]  # best first, in the beam's order
        plain = transformer.beam_search(pipe.model, src, **search)  # n_best=1
        assert best == hyps[0] == tokenizer.decode(plain[0].tolist()).strip()
    assert len(set(n_best[0])) == 3  # here the hypotheses also read differently: their order is visible


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


def test_translate_samples_with_a_generator(tmp_path, tokenizer):
    """With a generator each line is one sampled translation: decoding.sample on the line's
    source ids with the search's length limit; n_best > 1 is refused."""
    pipe = Pipeline.load(model_dir(tmp_path, tokenizer, "encoder-decoder"))
    lines = ["the cat sat", "a dog"]
    sampled = pipe.translate(lines, generator=torch.Generator().manual_seed(3), temperature=1.5)
    s = pipe.decode
    assert len(sampled) == 2 and all(isinstance(out, str) for out in sampled)
    for line in lines:  # one line alone: the same draws as sample's
        ids = pipe.encode_sources([line])[0]
        drawn = transformer.sample(pipe.model, ids, max_new_tokens=int(s.max_len_a * len(ids[0]) + s.max_len_b),
                                   temperature=1.5, generator=torch.Generator().manual_seed(3))
        one = pipe.translate([line], generator=torch.Generator().manual_seed(3), temperature=1.5)
        assert one == [tokenizer.decode(drawn[0].tolist()).strip()]
    with pytest.raises(ConfigError, match="sampling gives one translation"):
        pipe.translate(lines, generator=torch.Generator(), beam_size=2, n_best=2)


def test_generate_greedy_sampling_and_chat(tmp_path, tokenizer):
    path = model_dir(tmp_path, tokenizer, "decoder")
    pipe = Pipeline.load(path)
    prompt = "the cat"
    assert pipe.prompt_ids(prompt) == [pipe.model.config.bos_id] + tokenizer.encode(prompt)
    greedy = pipe.generate(prompt, temperature=0, max_new_tokens=6)
    ids = transformer.greedy_search(pipe.model, [pipe.prompt_ids(prompt)], max_len_a=0, max_len_b=6)
    assert greedy == tokenizer.decode(ids[0].tolist())
    # a seed is a torch.Generator seeded with it: same seed, same text; another seed, another text
    s = pipe.decode
    drawn = transformer.sample(pipe.model, [pipe.prompt_ids(prompt)], max_new_tokens=20, temperature=s.temperature,
                               top_k=s.top_k, top_p=s.top_p, generator=torch.Generator().manual_seed(3))
    sampled = pipe.generate(prompt, seed=3, max_new_tokens=20)
    assert sampled == pipe.generate(prompt, seed=3, max_new_tokens=20) == tokenizer.decode(drawn[0].tolist())
    assert pipe.generate(prompt, seed=4, max_new_tokens=20) != sampled
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
    hyps = Pipeline.load(path).translate(["the cat sat", "a dog ran"])  # the model's defaults: beam 2
    refs = [hyps[0], "un perro"]  # one line right: scores that are neither 0 nor 100
    ref.write_text("\n".join(refs) + "\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    assert main(["translate", str(path), "--input", str(src), "--output", str(out), "--beam", "1"]) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines == Pipeline.load(path).translate(["the cat sat", "a dog ran"], beam_size=1)
    assert main(["evaluate", str(path), "--src", str(src), "--ref", str(ref)]) == 0
    printed = capsys.readouterr().out
    assert "BLEU" in printed and "nrefs:1" in printed and "chrF2" in printed
    assert printed == f"{bleu(hyps, refs)}\n{chrf(hyps, refs)}\n"
    assert 0 < chrf(hyps, refs).score < 100
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
    assert main(["evaluate", str(lm), "--text", str(text), "--per-line"]) == 0
    model = Pipeline.load(lm).model
    cfg = model.config
    ppl = text_perplexity(model, ["the cat sat on the mat", "birds sing"],
                          lambda line: [cfg.bos_id] + tokenizer.encode(line) + [cfg.eos_id])  # <s> line </s>
    assert ppl > 1
    out = capsys.readouterr().out
    assert out.startswith(f"perplexity {ppl:.3f} on {text}: ") and "over 34 characters (2 lines each on its own" in out
    assert main(["evaluate", str(lm), "--text", str(text)]) == 0  # the file as one stream
    stream = [cfg.bos_id] + tokenizer.encode("the cat sat on the mat\nbirds sing\n") + [cfg.eos_id]
    ppl = text_perplexity(model, ["x"], lambda _: stream)
    assert capsys.readouterr().out.startswith(f"perplexity {ppl:.3f} on {text}: ")
    assert main(["generate", str(path), "--prompt", "the cat"]) == 0  # an encoder-decoder answers as translate
    assert capsys.readouterr().out.strip() == Pipeline.load(path).translate(["the cat"])[0].strip()


@pytest.fixture
def stdin_from(monkeypatch):
    """stdin_from(text): standard input becomes a real pipe that a thread fills with text, then closes."""
    fds = []

    def write_all(fd: int, data: bytes):
        try:
            while data:  # more than a pipe holds: written while the command reads
                data = data[os.write(fd, data):]
        except BrokenPipeError:  # the command stopped reading (a failing test): nothing to do
            pass
        finally:
            os.close(fd)

    def feed(text: str):
        read, write = os.pipe()
        fds.append(read)
        threading.Thread(target=write_all, args=(write, text.encode("utf-8")), daemon=True).start()

        class Stdin:
            def fileno(self):
                return read

        monkeypatch.setattr(sys, "stdin", Stdin())

    yield feed
    for fd in fds:
        os.close(fd)


def test_cli_translate_n_best_format_and_standard_input(tmp_path, tokenizer, capsys, stdin_from):
    path = model_dir(tmp_path, tokenizer, "encoder-decoder", beam_size=1, max_len_b=8)
    lines = ["the cat sat on the mat in the sun", "", "hace sol"]
    n_best = Pipeline.load(path).translate(lines, beam_size=3, n_best=2)
    src = tmp_path / "src.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["translate", str(path), "--input", str(src), "--beam", "3", "--n-best", "2"]) == 0
    out = capsys.readouterr().out
    rows = [line.split("\t", 2) for line in out.split("\n")[:-1]]  # INDEX<TAB>RANK<TAB>TEXT
    assert [(i, rank) for i, rank, _ in rows] == [(str(i), str(rank)) for i in range(3) for rank in (1, 2)]
    assert [text for _, _, text in rows] == [*n_best[0], "", "", *n_best[2]]  # an empty line: n empty hypotheses

    # standard input gives the same lines, to standard output or to --output
    stdin_from("\n".join(lines) + "\n")
    assert main(["translate", str(path), "--beam", "3", "--n-best", "2"]) == 0
    assert capsys.readouterr().out == out
    stdin_from("\n".join(lines))  # no final newline
    assert main(["translate", str(path), "--output", str(tmp_path / "out.txt")]) == 0
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == "".join(
        line + "\n" for line in Pipeline.load(path).translate(lines))
    # more than one read's worth of input (64 KiB): indices keep counting across the chunks
    stdin_from("\n" * 70_000 + "hace sol\n")
    assert main(["translate", str(path), "--beam", "3", "--n-best", "2"]) == 0
    last = capsys.readouterr().out.split("\n")[-3:]
    assert last == [f"70000\t1\t{n_best[2][0]}", f"70000\t2\t{n_best[2][1]}", ""]


def test_cli_generate_flags(tmp_path, tokenizer, capsys):
    path = model_dir(tmp_path, tokenizer, "decoder")
    pipe = Pipeline.load(path)
    prompt, n = "the cat", 12

    def generate(*flags):
        assert main(["generate", str(path), "--prompt", prompt, "--max-new-tokens", str(n), *flags]) == 0
        return capsys.readouterr().out

    sampled = generate("--seed", "5")
    assert sampled == generate("--seed", "5") == pipe.generate(prompt, seed=5, max_new_tokens=n) + "\n"
    assert generate("--seed", "6") != sampled
    cool = generate("--seed", "5", "--temperature", "0.5")
    assert cool == pipe.generate(prompt, seed=5, temperature=0.5, max_new_tokens=n) + "\n" != sampled
    greedy = pipe.generate(prompt, temperature=0, max_new_tokens=n) + "\n"
    assert greedy != sampled
    assert generate("--seed", "5", "--top-k", "1") == greedy
    assert generate("--seed", "5", "--top-p", "0.001") == greedy  # the nucleus is the top token alone
    s = pipe.decode
    beam = transformer.beam_search(pipe.model, [pipe.prompt_ids(prompt)], beam_size=3, length_penalty=s.length_penalty,
                                   length_penalty_kind=s.length_penalty_kind, max_len_a=0, max_len_b=n)
    assert generate("--beam", "3") == tokenizer.decode(beam[0].tolist()) + "\n"

    template = "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>{% endfor %}{% if add_generation_prompt %}<s>assistant:{% endif %}"
    (path / "chat_template.json").write_text(json.dumps({"chat_template": template, "bos_token": "<s>", "eos_token": "</s>"}))
    ids = tokenizer.encode("<s>user: the cat</s><s>assistant:")
    assert ids == Pipeline.load(path).prompt_ids(prompt, chat=True)
    answer = transformer.greedy_search(pipe.model, [ids], max_len_a=0, max_len_b=n)
    assert generate("--chat", "--temperature", "0") == tokenizer.decode(answer[0].tolist()) + "\n" != greedy


def test_generate_streams_each_token_as_it_is_chosen(tmp_path, tokenizer):
    pipe = Pipeline.load(model_dir(tmp_path, tokenizer, "decoder"))
    for decode in ({"temperature": 0}, {"seed": 7}):
        seen: list[int] = []
        text = pipe.generate("the cat", max_new_tokens=12, on_token=seen.append, **decode)
        assert seen and tokenizer.decode(seen) == text == pipe.generate("the cat", max_new_tokens=12, **decode)
        assert pipe.model.config.eos_id not in seen
    with pytest.raises(PipelineError, match="beam search cannot stream"):
        pipe.generate("the cat", beam_size=2, on_token=print)


def test_sampling_goes_on_past_max_positions(tmp_path, tokenizer):
    """A model of 8 positions asked for 30 tokens: when the context is full, sampling goes on from
    its last 4 tokens with a new cache, the same generator drawing on; each stretch is what sample
    gives for that context, and the streamed tokens are the output."""
    torch.manual_seed(0)
    model = transformer.build_model(cpu_tiny(vocab_size=tokenizer.vocab_size, arch="decoder", max_positions=8))
    eos = model.config.eos_id
    pipe = Pipeline.load(transformer.save_model(model, tmp_path / "lm8", tokenizer=tokenizer))
    assert pipe.max_source_tokens == 8
    s = pipe.settings(max_new_tokens=30)
    streamed = []
    ids = sample_long(pipe, pipe.prompt_ids("the"), s, torch.Generator().manual_seed(5),
                      lambda rows, tokens: streamed.append(int(tokens[0])))
    assert len(ids) == 30 and streamed == ids and eos not in ids  # (this seed draws no </s>)
    generator, context, expect = torch.Generator().manual_seed(5), pipe.prompt_ids("the"), []
    while len(expect) < 30:
        room = min(30 - len(expect), 8 - len(context) + 1)
        got = transformer.sample(pipe.model, [context], max_new_tokens=room, temperature=s.temperature,
                                 top_k=s.top_k, top_p=s.top_p, generator=generator)[0].tolist()
        expect += got
        context = (context + got)[-4:]
    assert ids == expect
    assert pipe.generate("the", seed=5, max_new_tokens=30) == tokenizer.decode(ids)
