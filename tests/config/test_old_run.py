"""A run directory written before [data] was nested (tests/fixtures/run-2026-11: flat keys, the
model directory of then) still reads: its config, its model, and `train --resume` from its
checkpoint."""

from __future__ import annotations

import shutil
from pathlib import Path

from transformer.cli import main
from transformer.config import load_config
from transformer.config.checks import tomllib
from transformer.config.data import FLAT
from transformer.config.toml import build_run_config
from transformer.decoding.pipeline import Pipeline
from transformer.tasks import TASKS

OLD = Path(__file__).parents[1] / "fixtures" / "run-2026-11"


def test_an_old_flat_config_reads_into_the_nested_sections_and_back():
    config = load_config(str(OLD / "config.toml"))
    assert config.objective == "seq2seq"
    assert config.data.text.train_src == "data/copy/t.src" and not hasattr(config.data, "train_src")
    assert config.data.images.train is None and config.data.vocab_size == 270
    assert "[data.text]" in config.to_toml() and "train_src" not in config.to_toml().split(
        "[data.text]"
    )[0].split("[data]")[1]
    assert build_run_config(tomllib.loads(config.to_toml())) == config


def test_old_flat_keys_load_from_a_file_and_from_set_in_order(tmp_path):
    """A flat key is nested as the file is read: beside its section's key it wins; a later --set,
    flat or nested, wins over both, and the saved config is nested."""
    text = (OLD / "config.toml").read_text()
    file = tmp_path / "config.toml"
    file.write_text(text.replace("[data]\n", '[data.text]\ntrain_src = "nested.src"\n\n[data]\n', 1)
                    .replace("[train]\n", '[data.images]\nrandom_crop = 3\n\n[train]\n', 1))
    config = load_config(str(file))
    assert config.data.text.train_src == "data/copy/t.src"  # the flat key beside the section's wins
    assert config.data.text.train_tgt == "data/copy/t.tgt" and config.data.images.random_crop == 0
    flat_then_nested = ['data.train_src="a.src"', 'data.text.train_src="b.src"']
    assert load_config(str(file), flat_then_nested).data.text.train_src == "b.src"
    assert load_config(str(file), flat_then_nested[::-1]).data.text.train_src == "a.src"
    saved = tomllib.loads(config.to_toml())
    assert saved["data"]["text"]["train_src"] == "data/copy/t.src"
    assert not set(saved["data"]) & set(FLAT)
    assert load_config(str(OLD / "config.toml"), ["data.drop_condition=0.2"]).data.images.drop_condition == 0.2


def test_an_old_model_directory_loads_and_runs_its_task():
    pipeline = Pipeline.load(OLD / "last")
    assert pipeline.task is TASKS["translation"]
    lines = (OLD / "data" / "copy" / "v.src").read_text().splitlines()[:3]
    assert len(pipeline.translate(lines, beam_size=2, max_len_b=5)) == 3


def test_an_old_run_resumes(tmp_path, monkeypatch, capsys):
    run = tmp_path / "run"
    shutil.copytree(OLD, run)
    monkeypatch.chdir(run)  # its config names data/copy/... relative to where it ran
    argv = ["train", "config.toml", "--out", ".", "--resume", "--set", "train.max_steps=4",
            "--set", f'data.cache="{tmp_path / "cache"}"']
    assert main(argv) == 0, capsys.readouterr().err
    steps = [line for line in (run / "metrics.jsonl").read_text().splitlines() if '"train"' in line]
    assert '"step": 4' in steps[-1]
    assert (run / "checkpoints" / "step-000004").is_dir()
