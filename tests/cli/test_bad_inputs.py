"""A catalogue of bad and odd-but-valid inputs, command by command, and for the Python API.

The rules every command keeps:
- Bad input: exactly one line on stderr, `transformer CMD: error: <what is wrong and what to do>`,
  exit status 2, no traceback. argparse's own errors (a flag's type, a missing argument) print the
  usage first; their last line is the error. Nothing is half-written: no output file where there
  was none, an existing one unchanged, no temporary `.NAME.*.tmp` left behind.
- Odd but valid input (CRLF, a UTF-8 byte-order mark, empty and whitespace-only lines, no final
  newline, very long or one-character lines, NFD Unicode): exactly one output line per input line
  (see transformer.data.lines).
- The Python API raises ValueError subclasses (ConfigError, ModelFileError, PipelineError) for bad
  values and TypeError for a wrong kind of argument, each naming the fix.

Models are tiny and untrained; one training run of 2 steps makes the checkpoints `average` needs.
"""

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import transformer
from tests.cli.common import run
from transformer.cli import main
from transformer.config import ConfigError, DecodeConfig, ModelConfig, cpu_tiny, load_config
from transformer.data.tokenizer import train_bpe
from transformer.decoding.inputs import PipelineError
from transformer.decoding.pipeline import Pipeline
from transformer.model.io import ModelFileError

TEXT = ["the cat sat on the mat", "a dog ran in the park", "el gato se sentó", "hace sol hoy", "café crème"] * 30

SRC = str(Path(__file__).resolve().parents[2] / "src")


# ---- helpers ----

def fails(argv, capsys, phrase: str, command: str | None = None) -> str:
    """The command exits 2 with one stderr line `transformer CMD: error: ...` containing phrase."""
    rc, _, err = run(argv, capsys)
    command = command or str(argv[0])
    assert rc == 2, f"exit status {rc}, stderr: {err}"
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, f"not one line: {err!r}"
    assert err.startswith(f"transformer {command}: error: "), err
    assert phrase in err, f"{phrase!r} not in {err!r}"
    return err.strip()


def usage_fails(argv, capsys, phrase: str, command: str | None = None) -> str:
    """argparse's own error: usage first, then `transformer CMD: error: ...` last, exit 2."""
    rc, _, err = run(argv, capsys)
    command = command or str(argv[0])
    assert rc == 2 and err.startswith(f"usage: transformer {command} "), err
    last = err.splitlines()[-1]
    assert last.startswith(f"transformer {command}: error: ") and phrase in last, err
    return last


def leftovers(*dirs: Path) -> list[Path]:
    """Temporary files or directories (`.NAME.*.tmp`, `.NAME.tmp`) under dirs."""
    return [p for d in dirs if d.exists() for p in d.rglob(".*.tmp")]


def write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def m(tmp_path_factory):
    """A translation model (mt), a language model (lm), their tokenizer and a text file."""
    root = tmp_path_factory.mktemp("models")
    torch.manual_seed(0)
    tok = train_bpe(TEXT, vocab_size=300)
    decode = DecodeConfig(beam_size=1, max_len_b=4, max_new_tokens=4)
    made = {}
    for name, arch in (("mt", "encoder-decoder"), ("lm", "decoder")):
        model = transformer.build_model(cpu_tiny(vocab_size=tok.vocab_size, arch=arch, max_positions=16))
        made[name] = transformer.save_model(model, root / name, tokenizer=tok, decode=decode)
    text = write(root / "text.txt", "the cat sat\nhace sol hoy\n")
    return SimpleNamespace(root=root, tok=tok, text=text, **made)


def broken_copy(src: Path, dst: Path, remove=(), replace=None) -> Path:
    """A copy of model directory src with files removed or replaced ({name: text or bytes})."""
    shutil.copytree(src, dst)
    for name in remove:
        (dst / name).unlink()
    for name, data in (replace or {}).items():
        write(dst / name, data)
    return dst


# ---- model directories: every command that reads one ----

def _truncated_weights(mt: Path) -> bytes:
    return (mt / "model.safetensors").read_bytes()[:200]


@pytest.mark.parametrize("command", ["info", "translate", "generate", "evaluate", "attention"])
@pytest.mark.parametrize("case, phrase", [
    ("missing", "is not a directory: pass a model directory"),
    ("a-file", "is not a directory: pass a model directory"),
    ("no-config", "config.json not found"),
    ("corrupt-config", "is not valid JSON"),
    ("config-unknown-key", "unknown key model.d_modle (did you mean 'd_model'?)"),
    ("truncated-weights", "the file is truncated or corrupted"),
    ("no-weights", "model.safetensors not found"),
])
def test_a_bad_model_directory_is_one_line(m, tmp_path, capsys, command, case, phrase):
    path = tmp_path / "model"
    match case:
        case "missing":
            pass
        case "a-file":
            write(path, "not a model\n")
        case "no-config":
            broken_copy(m.mt, path, remove=["config.json"])
        case "corrupt-config":
            broken_copy(m.mt, path, replace={"config.json": '{"d_model": 64,'})
        case "config-unknown-key":
            broken_copy(m.mt, path, replace={"config.json": '{"d_modle": 64}'})
        case "truncated-weights":
            broken_copy(m.mt, path, replace={"model.safetensors": _truncated_weights(m.mt)})
        case "no-weights":
            broken_copy(m.mt, path, remove=["model.safetensors"])
    extra = {"info": [], "translate": ["--input", m.text], "generate": ["--prompt", "x"],
             "evaluate": ["--text", m.text], "attention": ["--text", "x", "--out", tmp_path / "a.png"]}[command]
    fails([command, path, *extra], capsys, phrase)
    assert not (tmp_path / "a.png").exists()


def test_a_model_directory_without_a_tokenizer(m, tmp_path, capsys):
    path = broken_copy(m.mt, tmp_path / "model", remove=["tokenizer.json"])
    fails(["translate", path, "--input", m.text], capsys, "has no tokenizer: expected tokenizer.json")
    assert run(["info", path], capsys)[0] == 0  # info needs no tokenizer


# ---- translate: --input, --output and the decoding flags ----

@pytest.mark.parametrize("case, phrase", [
    ("missing", "--input {tmp}/in.txt not found"),
    ("directory", "--input {tmp}/in.txt is a directory: pass a text file"),
    ("not-utf8", "{tmp}/in.txt line 3: invalid UTF-8; convert it to UTF-8"),
])
def test_translate_bad_input_file(m, tmp_path, capsys, case, phrase):
    src = tmp_path / "in.txt"
    if case == "directory":
        src.mkdir()
    elif case == "not-utf8":
        write(src, "the cat\nhace sol\nel ni\xf1o\n".encode("latin-1"))
    fails(["translate", m.mt, "--input", src, "--output", tmp_path / "out.txt"], capsys,
          phrase.format(tmp=tmp_path))
    assert not (tmp_path / "out.txt").exists() and not leftovers(tmp_path)


@pytest.mark.parametrize("case, phrase", [
    ("missing-directory", "--output {tmp}/no/such/dir/out.txt: the directory {tmp}/no/such/dir does not exist"),
    ("directory", "--output {tmp} is a directory: give a file name"),
])
def test_translate_bad_output_is_found_before_any_work(m, tmp_path, capsys, case, phrase):
    """Checked before the model is even read: a missing model directory is not what it reports."""
    out = tmp_path / "no" / "such" / "dir" / "out.txt" if case == "missing-directory" else tmp_path
    fails(["translate", tmp_path / "no-model", "--input", m.text, "--output", out], capsys, phrase.format(tmp=tmp_path))
    assert not (tmp_path / "no").exists() and not leftovers(tmp_path)


def test_translate_with_a_language_model_keeps_an_existing_output(m, tmp_path, capsys):
    out = write(tmp_path / "out.txt", "yesterday's translations\n")
    fails(["translate", m.lm, "--input", m.text, "--output", out], capsys,
          "this is a language model: use generate, not translate")
    assert out.read_text() == "yesterday's translations\n" and not leftovers(tmp_path)


def test_translate_with_a_language_model_fails_before_reading_standard_input(m, tmp_path):
    """Even with nothing on standard input (or input that has not arrived yet), the wrong model is named."""
    run = subprocess.run([sys.executable, "-m", "transformer", "translate", str(m.lm)], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": SRC})
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr == "transformer translate: error: this is a language model: use generate, not translate\n"


@pytest.mark.parametrize("flags, phrase", [
    (["--beam", "0"], "--beam 0: give a beam size of at least 1"),
    (["--beam", "-1"], "--beam -1: give a beam size of at least 1"),
    (["--n-best", "0"], "--n-best 0: give a number of hypotheses of at least 1"),
    (["--n-best", "3", "--beam", "2"], "--n-best 3 is more than --beam 2"),
    (["--n-best", "2"], "--n-best 2 is more than the model's beam size 1 (decode.json): give --beam 2 or more"),
    (["--max-len-a", "-1"], "--max-len-a -1.0: give a number >= 0"),
    (["--max-len-a", "inf"], "--max-len-a inf: give a number >= 0"),
    (["--lenpen", "nan"], "--lenpen nan: give a number"),
    (["--max-len-b", "-1"], "--max-len-b -1: give a number of tokens >= 0"),
    (["--min-len", "-2"], "--min-len -2: give a number of tokens >= 0"),
    (["--batch-tokens", "0"], "--batch-tokens 0: give a positive number of tokens"),
    (["--threads", "0"], "--threads 0: give a positive number of threads"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_translate_bad_decoding_flags(m, tmp_path, capsys, flags, phrase):
    fails(["translate", m.mt, "--input", m.text, "--output", tmp_path / "out.txt", *flags], capsys, phrase)
    assert not (tmp_path / "out.txt").exists()


def test_translate_beam_below_the_models_n_best(m, tmp_path, capsys):
    path = broken_copy(m.mt, tmp_path / "model",
                       replace={"decode.json": json.dumps(DecodeConfig(beam_size=3, n_best=2).to_dict())})
    fails(["translate", path, "--input", m.text, "--beam", "1"], capsys,
          "--beam 1 is less than the model's n_best=2 (decode.json): give --n-best 1")


@pytest.mark.parametrize("flags, phrase", [
    (["--beam", "two"], "argument --beam: invalid int value: 'two'"),
    (["--lenpen-kind", "cube"], "argument --lenpen-kind: invalid choice: 'cube'"),
    (["--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_translate_flag_types_are_argparse_errors(m, capsys, flags, phrase):
    usage_fails(["translate", m.mt, "--input", m.text, *flags], capsys, phrase)


def test_translate_odd_but_valid_lines_one_output_line_each(m, tmp_path, capsys):
    """BOM, CRLF, no final newline, empty and whitespace-only lines, a one-character line, a line
    far over max_positions, NFD text and characters Python's str.splitlines() would split on (only
    "\n" ends a line): one output line each, as Pipeline.translate gives them."""
    lines = ["the cat sat", "", "   ", "\t", "a", " ".join(["the cat sat on the mat"] * 20),
             unicodedata.normalize("NFD", "café crème"), "hace sol hoy", "a\u2028b\x85c\x0cd"]
    src = write(tmp_path / "in.txt", ("\ufeff" + "\r\n".join(lines)).encode("utf-8"))  # no final newline
    out = tmp_path / "out.txt"
    rc, stdout, err = run(["translate", m.mt, "--input", src, "--output", out], capsys)
    assert rc == 0 and stdout == ""
    assert err == ("transformer translate: note: 1 of 9 input lines had more than the model's max_positions=16 "
                   "tokens and were truncated to it (line 6)\n")
    got = out.read_bytes().decode("utf-8")
    assert got.count("\n") == len(lines) and got.endswith("\n") and "\r" not in got
    expected = Pipeline.load(m.mt).translate(lines, on_truncate=lambda _: None)
    assert got.split("\n")[:-1] == expected
    assert expected[1] == "" and expected[6] == Pipeline.load(m.mt).translate(["café crème"])[0]  # NFD = NFC


def test_translate_an_empty_file_gives_an_empty_file(m, tmp_path, capsys):
    out = tmp_path / "out.txt"
    assert run(["translate", m.mt, "--input", write(tmp_path / "in.txt", ""), "--output", out], capsys) == (0, "", "")
    assert out.read_bytes() == b""
    assert run(["translate", m.mt, "--input", write(tmp_path / "bom.txt", "\ufeff")], capsys) == (0, "", "")


def test_translate_n_best_gives_n_lines_per_input_line_even_for_an_empty_one(m, tmp_path, capsys):
    src = write(tmp_path / "in.txt", "the cat\n\nhace sol\n")
    rc, out, _ = run(["translate", m.mt, "--input", src, "--beam", "2", "--n-best", "2"], capsys)
    rows = [line.split("\t") for line in out.splitlines()]
    assert rc == 0 and [(r[0], r[1]) for r in rows] == [(i, r) for i in "012" for r in "12"]
    assert rows[2][2] == rows[3][2] == ""


def test_translate_standard_input_crlf_bom_and_invalid_utf8(m, tmp_path, capsys, monkeypatch):
    src = write(tmp_path / "in.txt", b"\xef\xbb\xbfthe cat\r\n\r\nhace sol")
    with open(src, "rb") as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        rc, out, err = run(["translate", m.mt], capsys)
    assert rc == 0 and err == "" and out.split("\n") == [*Pipeline.load(m.mt).translate(["the cat", "", "hace sol"]), ""]
    write(src, b"the cat\nhace sol\nel ni\xf1o\n")
    with open(src, "rb") as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        fails(["translate", m.mt, "--output", tmp_path / "out.txt"], capsys, "standard input line 3: invalid UTF-8")
    assert not (tmp_path / "out.txt").exists() and not leftovers(tmp_path)


# ---- generate ----

@pytest.mark.parametrize("flags, phrase", [
    (["--max-new-tokens", "-5"], "--max-new-tokens -5: give a positive number of tokens"),
    (["--max-new-tokens", "0"], "--max-new-tokens 0: give a positive number of tokens"),
    (["--temperature", "-1"], "--temperature -1.0: give a temperature >= 0 (0 = greedy)"),
    (["--top-p", "1.5"], "--top-p 1.5: give a probability above 0 and at most 1"),
    (["--top-p", "0"], "--top-p 0.0: give a probability above 0 and at most 1"),
    (["--top-k", "-1"], "--top-k -1: give a number of tokens >= 0 (0 = all)"),
    (["--beam", "0"], "--beam 0: give a beam size of at least 1"),
    (["--threads", "0"], "--threads 0: give a positive number of threads"),
    (["--chat"], "this model has no chat template (chat_template.json): drop --chat"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_generate_bad_flags(m, capsys, flags, phrase):
    fails(["generate", m.lm, "--prompt", "the cat", *flags], capsys, phrase)


def test_generate_with_a_translation_model(m, capsys):
    # an encoder-decoder answers the prompt as translate does; sampling is for language models
    fails(["generate", m.mt, "--prompt", "the cat", "--top-k", "5"], capsys,
          "--top-k: an encoder-decoder answers with beam search (--beam) as translate does")
    fails(["generate", m.lm, "--prompt", "the cat", "--prefix", "x: "], capsys,
          "--prefix names a text-to-text model's task: it is for encoder-decoder models")


@pytest.mark.parametrize("prompt", ["", "   ", "line one\nline two", unicodedata.normalize("NFD", "café"), "a" * 500],
                         ids=["empty", "spaces", "newline", "nfd", "long"])
def test_generate_odd_but_valid_prompts(m, capsys, prompt):
    rc, out, err = run(["generate", m.lm, "--prompt", prompt, "--temperature", "0"], capsys)
    assert rc == 0 and out.endswith("\n"), err
    assert err == "" or err.startswith("transformer generate: note: the prompt has")


# ---- evaluate ----

@pytest.mark.parametrize("flags, phrase", [
    (["--text", "T", "--src", "T"], "give --src (BLEU and chrF against --ref) alone, without --text"),
    ([], "--tsv (classification), --src and --ref (BLEU, chrF), --pairs (text-to-text), --text (perplexity) or --chat (replies)"),
    (["--src", "T"], "--tsv (classification), --src and --ref (BLEU, chrF), --pairs (text-to-text), --text (perplexity) or --chat"),
    (["--squad", "T", "--pairs", "T"], "give --squad (a question-answering model's exact match and F1) alone"),
    (["--beam", "0", "--src", "T", "--ref", "T"], "--beam 0: give a beam size of at least 1"),
    (["--pairs", "T", "--src", "T"], "give --src (BLEU and chrF against --ref) alone, without --pairs"),
], ids=["text-and-src", "neither", "src-without-ref", "squad-and-pairs", "beam-0", "pairs-and-src"])
def test_evaluate_bad_flags(m, capsys, flags, phrase):
    fails(["evaluate", m.mt, *[m.text if f == "T" else f for f in flags]], capsys, phrase)


def test_evaluate_bad_files(m, tmp_path, capsys):
    ref = write(tmp_path / "ref.txt", "one\ntwo\nthree\n")
    fails(["evaluate", m.mt, "--src", m.text, "--ref", ref], capsys,
          "--src has 2 lines but --ref has 3: they must be aligned line by line")
    fails(["evaluate", m.mt, "--src", m.text, "--ref", tmp_path / "nope.txt"], capsys,
          f"--ref {tmp_path / 'nope.txt'} not found")
    out = tmp_path / "no" / "hyp.txt"
    fails(["evaluate", tmp_path / "no-model", "--src", m.text, "--ref", m.text, "--output", out], capsys,
          f"--output {out}: the directory {out.parent} does not exist; create it first")
    assert not out.parent.exists()


def test_evaluate_the_wrong_kind_of_model(m, capsys):
    fails(["evaluate", m.mt, "--text", m.text], capsys, "perplexity (--text) needs a language model")
    fails(["evaluate", m.lm, "--src", m.text, "--ref", m.text], capsys, "this is a language model: use --text")


def test_evaluate_perplexity_of_nothing(m, tmp_path, capsys):
    blank = write(tmp_path / "blank.txt", "\n  \n\n")
    fails(["evaluate", m.lm, "--text", blank], capsys, "has no text, only blank lines")
    fails(["evaluate", m.lm, "--text", blank, "--per-line"], capsys, "has no non-empty line")
    fails(["evaluate", m.lm, "--text", blank, "--per-line", "--window", "8"], capsys,
          "--window and --stride are for the stream")
    fails(["evaluate", m.lm, "--text", blank, "--window", "100000"], capsys, "longer than the model's max_positions")


def test_evaluate_odd_but_valid_files(m, tmp_path, capsys):
    """CRLF and a BOM on one side only, an empty line on both: still aligned, scores printed."""
    src = write(tmp_path / "src.txt", b"\xef\xbb\xbfthe cat\r\n\r\nhace sol")
    ref = write(tmp_path / "ref.txt", "the cat\n\nit is sunny\n")
    out = tmp_path / "hyp.txt"
    rc, stdout, err = run(["evaluate", m.mt, "--src", src, "--ref", ref, "--output", out], capsys)
    assert rc == 0 and stdout.startswith("BLEU") and "chrF" in stdout, err
    assert out.read_text(encoding="utf-8").count("\n") == 3


# ---- train ----

MODEL = '[model]\nd_model = 32\nn_heads = 2\nn_encoder_layers = 1\nn_decoder_layers = 1\nd_ff = 64\nmax_positions = 64\n'


def train_config(tmp_path: Path, src: str = "the cat sat\nhace sol\n", tgt: str | bytes = "the cat sat\nhace sol\n",
                 extra: str = "") -> Path:
    """A tiny translation config over train.src/train.tgt in tmp_path, with extra TOML lines appended."""
    write(tmp_path / "train.src", src)
    write(tmp_path / "train.tgt", tgt)
    return write(tmp_path / "c.toml", f'{MODEL}[data]\ntrain_src = "{tmp_path}/train.src"\n'
                                      f'train_tgt = "{tmp_path}/train.tgt"\nvocab_size = 300\nmax_len = 32\n'
                                      f'[train]\nmax_steps = 2\nbatch_tokens = 64\nwarmup_steps = 1\n'
                                      f'bleu_samples = 0\nprecision = "fp32"\n{extra}')


@pytest.mark.parametrize("case, phrase", [
    ("missing-config", "not found: pass a TOML config file"),
    ("not-toml", "is not valid TOML"),
    ("config-not-utf8", "is not valid TOML"),
    ("unknown-key", "unknown key train.max_stepz (did you mean 'max_steps'?)"),
    ("wrong-type", "train.max_steps='two' is not valid: it must be int"),
    ("set-without-equals", "--set 'train.max_steps' is not valid: write section.key=value"),
    ("set-unknown-section", "unknown section [trian] (did you mean [train]?)"),
    ("set-bad-value", "train.batch_tokens=0 is not valid: it must be an integer > 0"),
    ("model-heads", "d_model=32 is not divisible by n_heads=3"),
])
def test_train_bad_config(tmp_path, capsys, case, phrase):
    cfg = train_config(tmp_path)
    argv = ["train", cfg, "--out", tmp_path / "run"]
    match case:
        case "missing-config":
            argv[1] = tmp_path / "nope.toml"
        case "not-toml":
            write(cfg, "this is not toml\n")
        case "config-not-utf8":
            write(cfg, b"[train]\nmax_steps = 2 # \xff\n")
        case "unknown-key":
            argv += ["--set", "train.max_stepz=3"]
        case "wrong-type":
            write(cfg, cfg.read_text().replace("max_steps = 2", 'max_steps = "two"'))
        case "set-without-equals":
            argv += ["--set", "train.max_steps"]
        case "set-unknown-section":
            argv += ["--set", "trian.seed=1"]
        case "set-bad-value":
            argv += ["--set", "train.batch_tokens=0"]
        case "model-heads":
            argv += ["--set", "model.n_heads=3"]
    fails(argv, capsys, phrase)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("case, phrase", [
    ("data-missing", "train.tgt not found: check the path in the [data] section"),
    ("data-lengths-differ", "train.src has 2 lines but {tmp}/train.tgt has 3: the files must be aligned"),
    ("data-not-utf8", "train.tgt line 2: invalid UTF-8 (byte 0xf1)"),
    ("data-empty", "train.tgt is empty: expected one sentence per line"),
    ("all-pairs-empty", "have no pair where both sides are non-empty"),
    ("max-len-too-small", "no training example is at most data.max_len=2 tokens long: raise data.max_len"),
    ("accumulate-too-large", "fewer than one step needs (accumulate x processes = 50): lower train.batch_tokens"),
    ("resume-without-checkpoint", "--resume: {tmp}/run has no checkpoint to resume from"),
])
def test_train_bad_data(tmp_path, capsys, case, phrase):
    cfg = train_config(tmp_path)
    argv = ["train", cfg, "--out", tmp_path / "run"]
    match case:
        case "data-missing":
            (tmp_path / "train.tgt").unlink()
        case "data-lengths-differ":
            write(tmp_path / "train.tgt", "a\nb\nc\n")
        case "data-not-utf8":
            write(tmp_path / "train.tgt", "the cat\nel ni\xf1o\n".encode("latin-1"))
        case "data-empty":
            write(tmp_path / "train.tgt", "\n\n")
        case "all-pairs-empty":
            write(tmp_path / "train.tgt", "\n \nx\n")
            write(tmp_path / "train.src", "a\nb\n\n")
        case "max-len-too-small":
            argv += ["--set", "data.max_len=2"]
        case "accumulate-too-large":
            argv += ["--set", "train.accumulate=50"]
        case "resume-without-checkpoint":
            argv += ["--resume"]
    fails(argv, capsys, phrase.format(tmp=tmp_path))
    assert not (tmp_path / "run").exists()  # the run directory made for it is removed again


def test_train_failing_in_an_existing_directory_leaves_it_alone(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    write(tmp_path / "run" / "notes.txt", "mine\n")
    fails(["train", train_config(tmp_path, tgt="a\nb\nc\n"), "--out", tmp_path / "run"], capsys, "must be aligned")
    assert (tmp_path / "run" / "notes.txt").read_text() == "mine\n" and not leftovers(tmp_path)


def test_train_out_is_a_file(tmp_path, capsys):
    out = write(tmp_path / "run", "keep me\n")
    fails(["train", train_config(tmp_path), "--out", out], capsys, f"--out {out}: {out} is a file, not a directory")
    assert out.read_text() == "keep me\n"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """One 2-step run on odd but valid data: BOM, CRLF, empty and whitespace-only pairs, no final newline."""
    root = tmp_path_factory.mktemp("train")
    pairs = [("the cat sat", "the cat sat"), ("", "dropped"), ("  ", "\t"), ("hace sol hoy", "hace sol hoy")] * 5
    src = "\ufeff" + "\r\n".join(s for s, _ in pairs)
    tgt = "\n".join(t for _, t in pairs) + "\n"
    cfg = train_config(root, src, tgt, extra="save_every = 1\nkeep_last = 2\n")
    log = io.StringIO()
    with contextlib.redirect_stdout(log):
        assert main(["train", str(cfg), "--out", str(root / "run")]) == 0
    (root / "log.txt").write_text(log.getvalue())
    return root / "run"


def test_train_on_odd_but_valid_data_drops_and_counts_the_empty_pairs(run_dir):
    assert [p.name for p in sorted((run_dir / "checkpoints").iterdir())] == ["step-000001", "step-000002"]
    assert "dropped 10 empty line(s) of the training data" in (run_dir.parent / "log.txt").read_text()
    assert not leftovers(run_dir)


# ---- average ----

def test_average_bad_inputs(m, run_dir, tmp_path, capsys):
    out = tmp_path / "avg"
    empty = tmp_path / "empty"
    empty.mkdir()
    fails(["average", "--last", "2", empty, "--out", out], capsys, "has no checkpoints/step-* directories")
    fails(["average", "--last", "0", run_dir, "--out", out], capsys, "--last 0: give a positive number")
    fails(["average", "--last", "2", run_dir, run_dir, "--out", out], capsys, "--last N takes one run directory")
    fails(["average", empty, "--out", out], capsys, "config.json not found")
    fails(["average", tmp_path / "nope", "--out", out], capsys, "is not a directory: pass a model directory")
    ckpt = run_dir / "checkpoints" / "step-000002"
    fails(["average", ckpt, m.mt, "--out", out], capsys, "has a different model config from")
    assert not out.exists() and not leftovers(tmp_path)
    fails(["average", ckpt, "--out", write(tmp_path / "a-file", "x")], capsys, "is a file: pass a directory")
    assert (tmp_path / "a-file").read_text() == "x"


def test_average_more_than_there_are_is_a_note(run_dir, tmp_path, capsys):
    rc, out, err = run(["average", "--last", "5", run_dir, "--out", tmp_path / "avg"], capsys)
    assert rc == 0 and err == "transformer average: note: the run has only 2 checkpoint(s); averaging those\n"
    assert out.startswith("averaged 2 checkpoint(s)")


# ---- import-hf ----

def test_import_hf_bad_inputs(m, tmp_path, capsys):
    out = tmp_path / "out"
    fails(["import-hf", tmp_path / "nope", "--out", out], capsys, "does not exist: pass a Hugging Face model directory")
    (tmp_path / "empty").mkdir()
    fails(["import-hf", tmp_path / "empty", "--out", out], capsys, "has no config.json: pass a Hugging Face model")
    fails(["import-hf", m.text, "--out", out], capsys, "is neither a directory nor a .gguf file")
    broken = write(tmp_path / "hf" / "config.json", '{"model_type": "gpt2",')
    fails(["import-hf", broken.parent, "--out", out], capsys, "cannot read a Hugging Face config from")
    write(broken, '{"model_type": "wav2vec2"}')
    fails(["import-hf", broken.parent, "--out", out], capsys, "model_type='wav2vec2' is not supported")
    ct2 = write(tmp_path / "ct2" / "model.bin", "not a model")
    fails(["import-hf", ct2.parent, "--out", out], capsys, "lacks config.json, tokenizer.json")
    write(ct2.parent / "config.json", "{}")
    write(ct2.parent / "tokenizer.json", "{}")
    fails(["import-hf", ct2.parent, "--out", out], capsys, "not a CTranslate2 model.bin of a known version")
    write(broken, '{"model_type": "gpt2", "n_embd": 8, "n_head": 2, "n_layer": 1, "vocab_size": 10, '
                  '"bos_token_id": 0, "eos_token_id": 0}')
    fails(["import-hf", broken.parent, "--out", out], capsys, "cannot read the Hugging Face weights in")
    assert not out.exists()
    a_file = write(tmp_path / "a-file", "x")
    fails(["import-hf", tmp_path / "empty", "--out", a_file], capsys, f"--out {a_file} is a file")
    assert a_file.read_text() == "x"


# ---- attention ----

@pytest.mark.parametrize("flags, phrase", [
    (["--layer", "5"], "layer 5 is out of range: the decoder has 2 layers (0 to 1, or -1 for the last)"),
    (["--layer", "-3"], "layer -3 is out of range"),
    (["--head", "99"], "head 99 is out of range: the model has 4 heads"),
    (["--head", "abc"], "--head abc: give a head number (from 0), mean or all"),
    (["--kind", "encoder", "--layer", "9"], "layer 9 is out of range: the encoder has 2 layers"),
    (["--beam", "0"], "--beam 0: give a beam size of at least 1"),
    (["--text", ""], "the text is empty: give a sentence to decode"),
    (["--out", "{tmp}/a.jpg"], "the heatmap is written as .png, .svg or .pdf"),
    (["--out", "{tmp}/a"], "the heatmap is written as .png, .svg or .pdf"),
    (["--out", "{tmp}"], "is a directory: give an image file name (.png, .svg or .pdf)"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_attention_bad_flags(m, tmp_path, capsys, flags, phrase):
    argv = ["attention", m.mt, "--text", "the cat sat", "--out", tmp_path / "a.png",
            *[f.format(tmp=tmp_path) for f in flags]]
    fails(argv, capsys, phrase)
    assert not [p for p in tmp_path.iterdir() if p.is_file()] and not leftovers(tmp_path)


def test_attention_of_whitespace_is_odd_but_valid(m, tmp_path, capsys):
    """Spaces are text to a byte-level tokenizer: a heatmap of them is drawn, into a new directory."""
    rc, out, err = run(["attention", m.mt, "--text", "   ", "--out", tmp_path / "new" / "a.svg"], capsys)
    assert rc == 0 and out.startswith(f"wrote {tmp_path / 'new' / 'a.svg'}: cross-attention"), err
    assert (tmp_path / "new" / "a.svg").is_file() and not leftovers(tmp_path)


def test_attention_of_a_language_model_has_only_self_attention(m, tmp_path, capsys):
    fails(["attention", m.lm, "--text", "the cat", "--kind", "cross", "--out", tmp_path / "a.png"], capsys,
          "a language model has only decoder self-attention")


# ---- info ----

def test_info_bad_inputs(m, tmp_path, capsys):
    fails(["info", m.text], capsys, "is not a directory: pass a model directory")
    fails(["info", m.mt, "--seq-len", "0"], capsys, "--seq-len 0: give a positive sequence length")
    usage_fails(["info"], capsys, "the following arguments are required: model_dir")


# ---- data copy, data bible ----

@pytest.mark.parametrize("flags, phrase", [
    (["--min-len", "5", "--max-len", "3"], "--max-len 3 is less than --min-len 5"),
    (["--min-len", "0"], "--min-len 0: give a number of at least 1"),
    (["--min-len", "-1"], "--min-len -1: give a number of at least 1"),  # not translate's --min-len rule
    (["--n-train", "0"], "--n-train 0: give a number of at least 1"),
    (["--n-valid", "-1"], "--n-valid -1: give a number of at least 0"),
    (["--n-test", "-1"], "--n-test -1: give a number of at least 0"),
    (["--symbols", "0"], "--symbols 0: give a number from 1 to 26"),
    (["--symbols", "27"], "--symbols 27: give a number from 1 to 26"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_data_copy_bad_flags(tmp_path, capsys, flags, phrase):
    fails(["data", "copy", "--out", tmp_path / "copy", *flags], capsys, phrase, command="data copy")
    assert not (tmp_path / "copy").exists()


def test_data_copy_out_is_a_file(tmp_path, capsys):
    out = write(tmp_path / "copy", "x")
    fails(["data", "copy", "--out", out, "--n-train", "5"], capsys, f"--out {out} is a file", command="data copy")
    assert out.read_text() == "x"


def test_data_copy_odd_but_valid_sizes(tmp_path, capsys):
    """No valid or test pairs, one-symbol one-token lines: still aligned files, one line per pair."""
    argv = ["data", "copy", "--out", tmp_path, "--n-train", "3", "--n-valid", "0", "--n-test", "0",
            "--symbols", "1", "--min-len", "1", "--max-len", "1"]
    assert run(argv, capsys)[0] == 0
    assert (tmp_path / "train.src").read_text() == (tmp_path / "train.tgt").read_text() == "a\na\na\n"
    assert (tmp_path / "valid.src").read_text() == ""


def test_data_bible_bad_inputs(tmp_path, capsys):
    fails(["data", "bible", "--out", tmp_path / "b", "--sword-dir", tmp_path / "nope"], capsys,
          f"--sword-dir {tmp_path / 'nope'} does not exist", command="data bible")
    fails(["data", "bible", "--out", tmp_path / "b", "--sword-dir", tmp_path], capsys,
          "has no mods.d directory", command="data bible")
    fails(["data", "bible", "--out", tmp_path / "b", "--src", "eng", "--tgt", "eng"], capsys,
          "--src and --tgt are both 'eng': pick two different texts", command="data bible")
    a_file = write(tmp_path / "a-file", "x")
    fails(["data", "bible", "--out", a_file, "--sword-dir", tmp_path / "nope"], capsys,
          f"--out {a_file} is a file", command="data bible")
    usage_fails(["data", "bible", "--out", tmp_path / "b", "--src", "fra"], capsys,
                "argument --src: invalid choice: 'fra'", command="data bible")
    assert not (tmp_path / "b").exists()


# ---- the Python API ----

def test_load_model_of_a_missing_path_is_a_model_file_error(tmp_path):
    for load in (transformer.load_model, Pipeline.load):
        with pytest.raises(ModelFileError, match="is not a directory: pass a model directory") as info:
            load(tmp_path / "nope")
        assert isinstance(info.value, ValueError) and "\n" not in str(info.value)


def test_translate_takes_a_list_of_lines_not_a_bare_string(m):
    """Decided: a bare str is a TypeError (iterating it would translate each character); any other
    iterable of str is fine, and each entry is one line, whatever it holds."""
    pipe = Pipeline.load(m.mt)
    with pytest.raises(TypeError, match=r"translate takes a list of lines, not one str: pass \[text\]"):
        pipe.translate("the cat sat")
    with pytest.raises(TypeError, match="line 2 is NoneType, not str"):
        pipe.translate(["the cat", None])
    with pytest.raises(TypeError, match="line 1 is bytes, not str"):
        pipe.translate([b"the cat"])
    expected = pipe.translate(["the cat sat", "hace sol"])
    assert pipe.translate(line for line in ("the cat sat", "hace sol")) == expected
    assert pipe.translate(("the cat sat", "hace sol")) == expected
    assert pipe.translate([]) == []
    assert len(pipe.translate(["two\nlines", "", " "])) == 3


def test_pipeline_decoding_arguments(m):
    mt, lm = Pipeline.load(m.mt), Pipeline.load(m.lm)
    with pytest.raises(ConfigError, match=r"unknown key decode\.beam \(did you mean 'beam_size'\?\)"):
        mt.translate(["the cat"], beam=2)
    with pytest.raises(ConfigError, match="beam_size=0 is not valid"):
        mt.translate(["the cat"], beam_size=0)
    with pytest.raises(ConfigError, match="n_best=3 is larger than beam_size=2: .* raise beam_size or lower n_best"):
        mt.translate(["the cat"], beam_size=2, n_best=3)
    with pytest.raises(ConfigError, match="batch_tokens=0 is not valid"):
        mt.translate(["the cat"], batch_tokens=0)
    for beam in (0, -1):  # used to sample silently
        with pytest.raises(ConfigError, match=f"beam_size={beam} is not valid"):
            lm.generate("the cat", beam_size=beam)
    with pytest.raises(ConfigError, match=r"unknown key decode\.temprature \(did you mean 'temperature'\?\)"):
        lm.generate("the cat", temprature=0)
    with pytest.raises(ConfigError, match="top_p=1.5 is not valid"):
        lm.generate("the cat", top_p=1.5)
    with pytest.raises(TypeError, match="the prompt is list, not str"):
        lm.generate(["the cat", "a dog"])
    with pytest.raises(PipelineError, match="this is a translation model: use translate, not generate"):
        mt.generate("the cat")
    with pytest.raises(PipelineError, match="this is a language model: use generate, not translate"):
        lm.translate(["the cat"])
    with pytest.raises(PipelineError, match="this model has no chat template"):
        lm.generate("the cat", chat=True)


def test_build_model_and_model_config(m):
    with pytest.raises(TypeError, match=r"build_model takes a ModelConfig, not dict: .*ModelConfig.from_dict"):
        transformer.build_model({"d_model": 64})
    for values, message in [
        (dict(n_heads=3), "d_model=512 is not divisible by n_heads=3"),
        (dict(d_model="64"), "d_model='64' is not valid: it must be int"),
        (dict(norm_eps="small"), "norm_eps='small' is not valid: it must be float"),
        (dict(bias="yes"), "bias='yes' is not valid: it must be bool"),
        (dict(dropout=1.0), "dropout=1.0 is not valid: it must be a number in [0, 1)"),
        (dict(arch="gpt"), "arch='gpt' is not valid: choose one of 'encoder-decoder', 'encoder', 'decoder'"),
    ]:
        with pytest.raises(ConfigError) as info:
            ModelConfig(**values)
        assert str(info.value).startswith(message), (values, str(info.value))
    with pytest.raises(ConfigError, match=r"unknown key model\.d_modle \(did you mean 'd_model'\?\)"):
        ModelConfig.from_dict({"d_modle": 64})
    with pytest.raises(ConfigError, match="length_penalty='x' is not valid: it must be float"):
        DecodeConfig(length_penalty="x")  # used to be accepted
    assert ModelConfig(norm_eps=1, rope_base=10000).norm_eps == 1  # an int where a float goes is fine


def test_load_config_api(tmp_path):
    with pytest.raises(ConfigError, match="not found: pass a TOML config file"):
        load_config(tmp_path / "nope.toml")
    cfg = train_config(tmp_path)
    with pytest.raises(TypeError, match=r"overrides is a list of 'section.key=value' strings, not one str"):
        load_config(cfg, "train.max_steps=3")
    assert load_config(cfg, ["train.max_steps=3"]).train.max_steps == 3
    write(cfg, "\ufeff" + cfg.read_text().replace("\n", "\r\n"))  # a BOM and CRLF (Windows editors)
    assert load_config(cfg).train.max_steps == 2
