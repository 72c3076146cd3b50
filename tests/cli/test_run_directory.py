"""A run directory (what train writes: best/ and last/ model directories, no config.json) passed
where a model directory is wanted: every command answers in one wording, naming both."""

import shutil

import pytest
import torch

import transformer
from transformer.cli import main
from transformer.config import DecodeConfig, cpu_tiny
from transformer.data.tokenizer import train_bpe
from transformer.model.io import ModelFileError
from transformer.model_dir import load_config

TEXT = ["the cat sat on the mat", "a dog ran in the park", "el gato se sentó", "hace sol hoy"] * 30


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs") / "copy"
    torch.manual_seed(0)
    tok = train_bpe(TEXT, vocab_size=300)
    model = transformer.build_model(cpu_tiny(vocab_size=tok.vocab_size, max_positions=16))
    transformer.save_model(model, root / "best", tokenizer=tok, decode=DecodeConfig(beam_size=1, max_len_b=4))
    shutil.copytree(root / "best", root / "last")
    (root / "checkpoints").mkdir()
    return root


@pytest.mark.parametrize("command, extra", [
    ("translate", ["--input", "-"]),
    ("generate", ["--prompt", "x"]),
    ("classify", []),
    ("evaluate", ["--text", "t.txt"]),
    ("info", []),
    ("attention", ["--text", "x", "--out", "a.png"]),
    ("serve", []),
    ("export", ["--to", "ct2", "--out", "{tmp}/out"]),
])
def test_a_run_directory_is_answered_with_its_model_directories(run_dir, tmp_path, capsys, command, extra):
    if command == "serve":
        pytest.importorskip("fastapi")
    if command == "export":
        pytest.importorskip("ctranslate2")
    rc = main([command, str(run_dir), *[e.format(tmp=tmp_path) for e in extra]])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"transformer {command}: error: ")
    assert f"did you mean {run_dir / 'best'} (or {run_dir / 'last'})?" in err, err


def test_a_run_directory_with_only_last_names_it(run_dir, tmp_path):
    only = shutil.copytree(run_dir / "last", tmp_path / "run" / "last")
    with pytest.raises(ModelFileError, match=f"is a run directory, not a model directory: did you mean {only}\\?$"):
        load_config(only.parent)
    with pytest.raises(ModelFileError, match="is not a model directory"):
        load_config(tmp_path)
