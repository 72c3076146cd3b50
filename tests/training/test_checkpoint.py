"""Checkpoints (training/checkpoint.py): damaged ones on resume, the process count they were
written by, averaging, file modes."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

import pytest
import torch
from safetensors.torch import load_file

from transformer.cli import main as cli_main
from transformer.config import cpu_tiny
from transformer.model.build import build_model
from transformer.model.io import ModelFileError
from transformer.model_dir import load_model, load_tokenizers, save_model
from transformer.model_records import load_decode_config
from transformer.training.checkpoint import average_checkpoints, average_into, step_dirs
from transformer.training.trainer import TrainError, train


@pytest.fixture(scope="module")
def four_step_run(tmp_path_factory, tiny):
    """A finished 4-step run with checkpoints at steps 2 and 4, and its config."""
    run = tmp_path_factory.mktemp("four") / "run"
    cfg = tiny(max_steps=4, save_every=2, valid_every=100, bleu_samples=0)
    train(cfg, run, log=lambda _: None)
    assert [p.name for p in step_dirs(run)] == ["step-000002", "step-000004"]
    return run, cfg


@pytest.mark.parametrize("name, damage", [
    ("state.json", lambda b: b[: len(b) // 2]),  # torn
    ("state.json", lambda b: b"\xff\xfe" + b[2:]),  # not UTF-8
    ("state.json", lambda b: b'{"step": 4}'),  # JSON, but not the training state
    ("optimizer.safetensors", lambda b: b[: len(b) // 2]),
    ("optimizer.safetensors", lambda b: b""),
    ("optimizer.safetensors", None),  # missing
    ("model.safetensors", lambda b: b[: len(b) // 2]),
], ids=["state-torn", "state-not-utf8", "state-incomplete", "optimizer-torn", "optimizer-empty", "optimizer-missing",
        "model-torn"])
def test_resume_from_a_damaged_checkpoint_is_one_line_naming_the_file_and_the_way_out(tmp_path, four_step_run, name, damage, runs):
    """Every file of the newest checkpoint that --resume reads: damaged, resume stops with one line that
    names the file and says to delete the checkpoint; done, resume goes on from the one before it."""
    run = tmp_path / "run"
    shutil.copytree(four_step_run[0], run)
    cfg = dataclasses.replace(four_step_run[1], train=dataclasses.replace(four_step_run[1].train, max_steps=6))
    newest = step_dirs(run)[-1]
    file = newest / name
    if damage is None:
        file.unlink()
    else:
        file.write_bytes(damage(file.read_bytes()))
    with pytest.raises(ModelFileError) as info:
        train(cfg, run, resume=True, log=lambda _: None)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{file} ")
    assert f"delete {newest} to resume from the checkpoint before it" in message
    shutil.rmtree(newest)  # the way out the message gives
    lines = []
    train(cfg, run, resume=True, log=lines.append)
    assert f"resumed from {run / 'checkpoints' / 'step-000002'} at step 2" in lines
    assert runs.steps(run, "train") == list(range(1, 7))


def test_resume_with_a_damaged_run_tokenizer_says_where_the_copies_are(tmp_path, four_step_run, capsys, runs):
    run = tmp_path / "run"
    shutil.copytree(four_step_run[0], run)
    (run / "tokenizer.json").write_text('{"version": "1.0", "truncated', encoding="utf-8")
    cfg = runs.write_config(tmp_path / "c.toml", four_step_run[1])
    assert cli_main(["train", str(cfg), "--resume", "--out", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"transformer train: error: {run / 'tokenizer.json'} is not a valid tokenizer.json")
    assert err.count("\n") == 1
    assert f"copy it back from {run / 'checkpoints'}/step-*/" in err
    shutil.copy(step_dirs(run)[-1] / "tokenizer.json", run / "tokenizer.json")  # the way out
    assert cli_main(["train", str(cfg), "--resume", "--set", "train.max_steps=5", "--out", str(run)]) == 0
    assert runs.steps(run, "train") == list(range(1, 6))


def test_resume_with_another_number_of_processes_is_a_clear_error(tmp_path, tiny):
    """Exact resume restores each process's random state: a checkpoint of 2 processes cannot go on in 1."""
    train(tiny(max_steps=4), tmp_path / "run", log=lambda _: None)
    state_file = step_dirs(tmp_path / "run")[-1] / "state.json"
    state = json.loads(state_file.read_text())
    state["rng"] = state["rng"] * 2  # as a 2-process run writes it
    state_file.write_text(json.dumps(state))
    with pytest.raises(TrainError, match=r"was written by 2 process\(es\), this run has 1: resume with the same number"):
        train(tiny(max_steps=6), tmp_path / "run", resume=True, log=lambda _: None)


def test_average_checkpoints_and_cli(tmp_path, capsys, tiny):
    train(tiny(max_steps=8, keep_last=3), tmp_path / "run", log=lambda _: None)
    ckpts = step_dirs(tmp_path / "run")
    assert [p.name for p in ckpts] == ["step-000004", "step-000008"]
    averaged = average_checkpoints(ckpts)
    a, b = load_model(ckpts[0]), load_model(ckpts[1])
    for name, value in averaged.state_dict().items():
        assert torch.allclose(value, (a.state_dict()[name] + b.state_dict()[name]) / 2), name
    assert cli_main(["average", "--last", "2", str(tmp_path / "run"), "--out", str(tmp_path / "avg")]) == 0
    model = load_model(tmp_path / "avg")
    assert torch.equal(model.state_dict()["lm_head.weight"], averaged.state_dict()["lm_head.weight"])
    assert load_tokenizers(tmp_path / "avg")[0].vocab_size == model.config.vocab_size
    assert cli_main(["average", str(ckpts[0]), str(ckpts[1]), "--out", str(tmp_path / "avg2")]) == 0
    assert cli_main(["average", "--last", "2", str(tmp_path), "--out", str(tmp_path / "x")]) == 2
    assert "has no checkpoints/step-* directories" in capsys.readouterr().err


def test_averaging_no_checkpoints_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="^no checkpoints to average$"):
        average_checkpoints([])
    with pytest.raises(ValueError, match="^no checkpoints to average$"):
        average_into([], tmp_path / "avg")
    assert not (tmp_path / "avg").exists()


def test_averaging_bf16_checkpoints_gives_bf16_weights_rounded_from_the_fp32_mean(tmp_path):
    torch.manual_seed(0)
    paths = [save_model(build_model(cpu_tiny(vocab_size=16)).to(torch.bfloat16), tmp_path / f"c{i}") for i in range(3)]
    stored = [load_file(p / "model.safetensors") for p in paths]
    assert {t.dtype for t in stored[0].values()} == {torch.bfloat16}
    assert {p.dtype for p in average_checkpoints(paths).parameters()} == {torch.bfloat16}
    averaged = load_file(average_into(paths, tmp_path / "avg") / "model.safetensors")
    assert set(averaged) == set(stored[0])
    for name, value in averaged.items():
        mean = sum(s[name].double() for s in stored) / 3
        assert value.dtype == torch.bfloat16, name
        torch.testing.assert_close(value.double(), mean, rtol=2 ** -8, atol=0, msg=name)  # bf16: 8 significant bits
    name = "decoder.layers.0.cross_attn.q_proj.weight"
    assert not any(torch.equal(averaged[name], s[name]) for s in stored)


def test_average_into_carries_the_last_checkpoints_tokenizer_and_decoding_defaults(tmp_path):
    """The last checkpoint's: a shared tokenizer or a (source, target) pair, and decode.json."""
    from transformer.config import DecodeConfig
    from transformer.data.tokenizer import train_bpe

    torch.manual_seed(0)
    shared, other = train_bpe(["aaaa bbbb"] * 20, 300), train_bpe(["cccc dddd"] * 20, 300)
    one = save_model(build_model(cpu_tiny(vocab_size=300)), tmp_path / "one", tokenizer=shared,
                     decode=DecodeConfig(beam_size=2))
    two = save_model(build_model(cpu_tiny(vocab_size=300)), tmp_path / "two", tokenizer=(shared, other),
                     decode=DecodeConfig(beam_size=5, length_penalty=1.0))
    assert load_decode_config(one) != load_decode_config(two)
    for paths, out in (([one, two], tmp_path / "avg12"), ([two, one], tmp_path / "avg21")):
        average_into(paths, out)
        last = paths[-1]
        assert load_decode_config(out) == load_decode_config(last)
        tokenizer_files = sorted(p.name for p in last.glob("tokenizer*.json"))
        assert sorted(p.name for p in out.glob("tokenizer*.json")) == tokenizer_files
        for name in tokenizer_files:
            assert (out / name).read_bytes() == (last / name).read_bytes(), name


def test_every_file_a_run_and_average_write_is_readable_by_others(tmp_path, tiny):
    """Weights included: safetensors replaces the temporary file with an owner-only one, so the mode
    is set after the write. Under umask 022 every file is 0644 and every directory 0755."""
    old = os.umask(0o022)
    try:
        train(tiny(max_steps=4), tmp_path / "run", log=lambda _: None)
        assert cli_main(["average", "--last", "2", str(tmp_path / "run"), "--out", str(tmp_path / "avg")]) == 0
    finally:
        os.umask(old)
    files = [p for p in (tmp_path / "run").rglob("*") if p.is_file()] + list((tmp_path / "avg").iterdir())
    names = {p.name for p in files}
    assert {"model.safetensors", "optimizer.safetensors", "state.json", "config.json", "metrics.jsonl",
            "tokenizer.json", "decode.json", "config.toml"} <= names
    wrong = {str(p.relative_to(tmp_path)): oct(p.stat().st_mode & 0o777) for p in files
             if p.stat().st_mode & 0o777 != 0o644}
    assert not wrong
    dirs = [p for p in (tmp_path / "run").rglob("*") if p.is_dir()]
    assert all(p.stat().st_mode & 0o777 == 0o755 for p in dirs), [oct(p.stat().st_mode) for p in dirs]


def test_a_checkpoint_that_names_its_best_metric_best_valid_loss_resumes_with_it(tmp_path, four_step_run):
    """Checkpoints written before state.json said best_metric (and best_key) hold the best under
    best_valid_loss: resume reads it there, and the next checkpoint writes it under its new name."""
    run = tmp_path / "run"
    shutil.copytree(four_step_run[0], run)
    state_file = step_dirs(run)[-1] / "state.json"
    state = json.loads(state_file.read_text())
    assert state["best_key"] == "valid_loss"
    state["best_valid_loss"] = 0.001  # better than a 6-step model's validation loss
    del state["best_metric"], state["best_key"]
    state_file.write_text(json.dumps(state))
    cfg = dataclasses.replace(four_step_run[1], train=dataclasses.replace(four_step_run[1].train, max_steps=6))
    result = train(cfg, run, resume=True, log=lambda _: None)
    assert (result.best, result.best_key, result.best_valid_loss) == (0.001, "valid_loss", 0.001)
    state = json.loads((step_dirs(run)[-1] / "state.json").read_text())
    assert (state["step"], state["best_metric"], state["best_key"]) == (6, 0.001, "valid_loss")
    assert "best_valid_loss" not in state
