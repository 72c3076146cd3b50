"""The `transformer` command: output and one-line errors."""

import transformer
from transformer.cli import main
from transformer.config import cpu_tiny


def test_info_prints_config_parameters_and_flops(tmp_path, capsys):
    model = transformer.build_model(cpu_tiny(vocab_size=40))
    transformer.save_model(model, tmp_path / "m")
    assert main(["info", str(tmp_path / "m"), "--seq-len", "32"]) == 0
    out = capsys.readouterr().out
    assert "d_model = 64" in out
    assert f"parameters: {transformer.count_parameters(model):,}" in out
    assert f"forward {transformer.flops_per_token(model.config, 32)['forward']:,}" in out
    assert "translates:" not in out  # no languages.json
    transformer.save_model(model, tmp_path / "mt", languages={"source": "es", "target": "en"})
    assert main(["info", str(tmp_path / "mt")]) == 0
    assert "translates: es -> en" in capsys.readouterr().out


def test_info_counts_an_image_model_per_image(tmp_path, capsys):
    cfg = cpu_tiny(vocab_size=1, pad_id=0, bos_id=0, eos_id=0, arch="encoder", norm_position="pre", n_classes=3,
                   vision={"image_size": 8, "patch_size": 4, "channels": 1})
    transformer.save_model(transformer.build_model(cfg), tmp_path / "m")
    assert main(["info", str(tmp_path / "m")]) == 0
    out = capsys.readouterr().out
    assert f"FLOPs per image (4 patches of 4 x 4 + [CLS]): forward {transformer.flops_per_image(cfg)['forward']:,}" in out
    assert "per token" not in out


def test_info_on_a_missing_directory_is_one_line(tmp_path, capsys):
    assert main(["info", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("transformer info: error:") and "is not a directory" in err
    assert len(err.splitlines()) == 1


# ---- the command's manners: version, help, python -m, unknown flags, streaming, truncation ----

import os  # noqa: E402
import select  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from transformer.config import DecodeConfig  # noqa: E402
from transformer.data.tokenizer import train_bpe  # noqa: E402
from transformer.decoding.pipeline import Pipeline  # noqa: E402

SRC = str(Path(__file__).resolve().parents[2] / "src")
ENV = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
TEXT = ["the cat sat on the mat", "a dog ran in the park", "el gato se sentó", "hace sol hoy"] * 30


@pytest.fixture(scope="module")
def translator(tmp_path_factory):
    torch.manual_seed(0)
    tok = train_bpe(TEXT, vocab_size=300)
    model = transformer.build_model(cpu_tiny(vocab_size=tok.vocab_size, max_positions=16))
    return transformer.save_model(model, tmp_path_factory.mktemp("m") / "mt", tokenizer=tok,
                                  decode=DecodeConfig(beam_size=1, max_len_b=4))


def test_version_and_python_dash_m(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    from importlib import metadata

    torch_version = metadata.version("torch")  # what pip installed: a CUDA build's may lack "+cu130"
    assert capsys.readouterr().out.strip() == f"transformer {transformer.__version__} (torch {torch_version}, " \
                                              f"Python {sys.version.split()[0]})"
    assert torch.__version__.startswith(torch_version)
    run = subprocess.run([sys.executable, "-m", "transformer", "--help"], env=ENV, capture_output=True, text=True)
    assert run.returncode == 0
    assert "Attention Is All You Need" in run.stdout and "examples:" in run.stdout
    assert "the only place that reads argv" not in run.stdout  # a user's description, not the developer's


def test_unknown_flag_shows_the_commands_usage_and_the_closest_flag(capsys):
    with pytest.raises(SystemExit) as e:
        main(["translate", "some/model", "--beams", "4"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: transformer translate ")
    assert err.splitlines()[-1] == "transformer translate: error: unrecognized argument: --beams 4 (did you mean --beam?)"
    with pytest.raises(SystemExit):
        main(["data", "copy", "--out", "x", "--n-trains", "5"])
    err = capsys.readouterr().err
    assert err.startswith("usage: transformer data copy ") and "(did you mean --n-train?)" in err


def test_device_defaults_to_auto_everywhere():
    from transformer.cli import build_parser

    parser = build_parser()
    for argv in (["translate", "m"], ["generate", "m", "--prompt", "x"], ["evaluate", "m", "--text", "t"],
                 ["attention", "m", "--text", "x", "--out", "a.png"]):
        assert parser.parse_args(argv).device == "auto", argv


def test_translate_answers_each_line_as_it_arrives_on_an_open_pipe(translator):
    """A pipe that stays open (a person typing): each line's translation comes before the next is sent."""
    expected = Pipeline.load(translator).translate(["the cat sat", "hace sol hoy"])
    proc = subprocess.Popen([sys.executable, "-m", "transformer", "translate", str(translator), "--threads", "1"],
                            env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for line, want in zip(["the cat sat", "hace sol hoy"], expected, strict=True):
            proc.stdin.write(line.encode() + b"\n")
            proc.stdin.flush()
            deadline = time.monotonic() + 60
            while not select.select([proc.stdout], [], [], 0.1)[0]:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline, "no output while the pipe stays open"
            assert proc.stdout.readline().decode().rstrip("\n") == want
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()


def test_translate_truncates_over_long_lines_and_says_which(translator, tmp_path, capsys):
    long = " ".join(["the cat sat on the mat"] * 10)
    lines = ["the cat", long, "", "hace sol", long, "  "]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines), encoding="utf-8")  # no final newline
    out = tmp_path / "out.txt"
    assert main(["translate", str(translator), "--input", str(src), "--output", str(out)]) == 0
    got = out.read_text(encoding="utf-8").split("\n")
    assert len(got) == len(lines) + 1 and got[-1] == ""  # one line per input line
    assert got[:-1] == Pipeline.load(translator).translate(lines, on_truncate=lambda _: None)
    assert capsys.readouterr().err == ("transformer translate: note: 2 of 6 input lines had more than the model's "
                                       "max_positions=16 tokens and were truncated to it (lines 2, 5)\n")
    ref = tmp_path / "ref.txt"
    ref.write_text("\n".join(["x"] * len(lines)) + "\n", encoding="utf-8")
    assert main(["evaluate", str(translator), "--src", str(src), "--ref", str(ref)]) == 0
    assert "truncated to it (lines 2, 5)" in capsys.readouterr().err


def test_generate_keeps_the_end_of_an_over_long_prompt(tmp_path, capsys):
    torch.manual_seed(0)
    tok = train_bpe(TEXT, vocab_size=300)
    model = transformer.build_model(cpu_tiny(vocab_size=tok.vocab_size, arch="decoder", max_positions=16))
    path = transformer.save_model(model, tmp_path / "lm", tokenizer=tok, decode=DecodeConfig(add_bos=True))
    pipe = Pipeline.load(path)
    prompt = " ".join(TEXT[:4])
    ids = pipe.prompt_ids(prompt)
    assert len(ids) > 16
    kept = pipe.fit_prompt(ids, max_new_tokens=4)
    assert len(kept) == 13 and kept[0] == pipe.model.config.bos_id and kept[1:] == ids[-12:]  # 13 + 4 - 1 = 16
    assert len(pipe.fit_prompt(ids, max_new_tokens=50)) == 8  # never less than half the table
    assert pipe.fit_prompt(ids[:5], max_new_tokens=4) == ids[:5]
    assert main(["generate", str(path), "--prompt", prompt, "--temperature", "0", "--max-new-tokens", "4"]) == 0
    captured = capsys.readouterr()
    assert captured.err == (f"transformer generate: note: the prompt has {len(ids)} tokens, more than fit with 4 new "
                            "ones in the model's max_positions=16: kept its last 13 tokens\n")
    expected = transformer.greedy_search(pipe.model, [kept], max_len_a=0, max_len_b=4)
    assert captured.out == tok.decode(expected[0].tolist()) + "\n"


def test_stream_lines_hands_over_at_most_chunk_lines():
    from transformer.data.lines import stream_lines

    r, w = os.pipe()
    os.write(w, ("a\r\n" * 1300 + "tail").encode())
    os.close(w)
    chunks = list(stream_lines(r, chunk_lines=512))
    assert [len(c) for c in chunks] == [512, 512, 277]
    assert chunks[0][0] == "a" and chunks[-1][-1] == "tail"


@pytest.mark.slow
def test_generate_compile_on_says_what_compile_off_says(tmp_path, capsys):
    """--compile on (the compiled step, on the CPU) gives the greedy text of --compile off."""
    torch.manual_seed(1)
    tok = train_bpe(TEXT, vocab_size=300)
    cfg = cpu_tiny(vocab_size=tok.vocab_size, arch="decoder", positional="rope", norm="rmsnorm",
                   norm_position="pre", activation="swiglu")
    path = transformer.save_model(transformer.build_model(cfg), tmp_path / "lm", tokenizer=tok)
    outputs = []
    for compile in ("off", "on"):
        argv = ["generate", str(path), "--prompt", " ".join(TEXT[:2]), "--temperature", "0",
                "--max-new-tokens", "40", "--compile", compile]
        assert main(argv) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and outputs[0].strip()


def test_a_model_without_a_compiled_step_says_why_and_stays_eager(translator):
    with pytest.warns(UserWarning, match="^decoding stays eager: only language models"):
        pipe = Pipeline.load(translator, compile="on")
    assert pipe.decode.compile == "on"
    assert pipe.translate(["the cat"]) == Pipeline.load(translator).translate(["the cat"])
