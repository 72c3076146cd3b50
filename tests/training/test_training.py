"""Training: loss, schedule, config loading, checkpoints, exact resume, averaging, the CLI."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from transformer.cli import main as cli_main
from transformer.config import ConfigError, RunConfig, build_run_config, cpu_tiny, load_config
from transformer.data.copy import write_copy_task
from transformer.model.build import build_model
from transformer.model.io import ModelFileError
from transformer.model_dir import load_decode_config, load_model, load_tokenizers, save_model
from transformer.training.checkpoint import average_checkpoints, average_into, step_dirs
from transformer.training.loss import label_smoothed_cross_entropy
from transformer.training.schedule import inverse_sqrt, warmup_cosine
from transformer.training.trainer import TrainError, train
from transformer.training.validation import bleu_sample

SRC = str(Path(__file__).resolve().parents[2] / "src")


# ---- loss ----

def test_label_smoothing_matches_the_explicit_distribution():
    torch.manual_seed(0)
    V, pad, eps = 7, 0, 0.1
    logits = torch.randn(2, 5, V)
    target = torch.tensor([[3, 4, 5, 0, 0], [1, 2, 6, 6, 3]])
    out = label_smoothed_cross_entropy(logits, target, eps, pad)
    logp = logits.log_softmax(-1)
    expected = 0.0
    for b in range(2):
        for t in range(5):
            y = target[b, t].item()
            if y == pad:
                continue
            q = torch.full((V,), eps / (V - 2))
            q[pad], q[y] = 0.0, 1 - eps  # smoothing over the vocabulary minus padding
            expected += -(q * logp[b, t]).sum().item()
    assert out.n_tokens == 8
    assert out.loss.item() == pytest.approx(expected, rel=1e-5)
    nll = F.cross_entropy(logits.reshape(-1, V), target.reshape(-1), ignore_index=pad, reduction="sum")
    assert out.nll.item() == pytest.approx(nll.item(), rel=1e-5)


def test_padding_targets_add_nothing_and_eps_zero_is_cross_entropy():
    torch.manual_seed(1)
    logits = torch.randn(1, 4, 9, requires_grad=True)
    target = torch.tensor([[5, 6, 0, 0]])
    out = label_smoothed_cross_entropy(logits, target, 0.1, pad_id=0)
    out.loss.backward()
    assert torch.all(logits.grad[0, 2:] == 0)  # padding positions get no gradient
    plain = label_smoothed_cross_entropy(logits, target, 0.0, pad_id=0)
    assert plain.loss.item() == pytest.approx(plain.nll.item())


def _textbook_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, eps: float, pad: int) -> torch.Tensor:
    """-sum q * log_softmax(logits) over non-padding rows, with q written out: the reference for the fused loss."""
    vocab = logits.size(-1)
    logp = logits.float().reshape(-1, vocab).log_softmax(-1)
    target = target.reshape(-1)
    q = torch.full_like(logp, eps / (vocab - 2))
    q[:, pad] = 0.0
    q[torch.arange(len(target)), target] = 1.0 - eps
    q[target == pad] = 0.0
    return -(q * logp).sum()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_fused_loss_and_gradient_match_the_textbook(monkeypatch, dtype, eps):
    import transformer.training.loss as loss_module

    monkeypatch.setattr(loss_module, "CHUNK_ELEMENTS", 3 * 50)  # chunks of 3 rows: 13 rows end on a ragged chunk
    torch.manual_seed(2)
    V, pad = 50, 1
    logits = (torch.randn(13, V) * 4).to(dtype).reshape(1, 13, V).requires_grad_()
    target = torch.randint(0, V, (1, 13))
    target[0, [4, 11, 12]] = pad  # padding inside and at the end
    before = logits.detach().clone()
    out = label_smoothed_cross_entropy(logits, target, eps, pad)
    (out.loss * 0.37).backward()
    fused_grad, logits.grad = logits.grad, None
    assert torch.equal(logits.detach(), before)  # the logits are read, not overwritten
    reference = _textbook_smoothed_loss(logits, target, eps, pad)
    (reference * 0.37).backward()
    nll = F.cross_entropy(logits.detach().float().reshape(-1, V), target.reshape(-1), ignore_index=pad,
                          reduction="sum")
    assert out.n_tokens == 10
    assert out.loss.dtype == out.nll.dtype == torch.float32
    assert out.loss.item() == pytest.approx(reference.item(), rel=1e-5)
    assert out.nll.item() == pytest.approx(nll.item(), rel=1e-5)
    assert fused_grad.dtype == dtype
    assert torch.all(fused_grad[0, [4, 11, 12]] == 0)  # padding rows get no gradient
    tolerance = {"atol": 1e-6, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 2e-3, "rtol": 1e-2}
    torch.testing.assert_close(fused_grad.float(), logits.grad.float(), **tolerance)
    with torch.no_grad():  # the forward-only path (validation) gives the same sums
        again = label_smoothed_cross_entropy(logits, target, eps, pad)
    assert again.loss.item() == pytest.approx(out.loss.item(), rel=1e-6)
    assert again.nll.item() == pytest.approx(out.nll.item(), rel=1e-6)


def test_fused_loss_refuses_a_second_backward_pass_with_a_clear_error():
    logits = torch.randn(3, 6, requires_grad=True)
    out = label_smoothed_cross_entropy(logits, torch.tensor([1, 2, 3]), 0.1, pad_id=0)
    out.loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backward ran twice through the same loss"):
        out.loss.backward()


# ---- schedule ----

def test_inverse_sqrt_schedule_follows_the_paper():
    d, w = 512, 4000
    assert inverse_sqrt(0, d, w) == inverse_sqrt(1, d, w) > 0  # guarded at step 0
    peak = inverse_sqrt(w, d, w)
    assert peak == pytest.approx(d ** -0.5 * w ** -0.5)
    assert inverse_sqrt(w // 2, d, w) == pytest.approx(peak / 2)  # linear warmup
    assert inverse_sqrt(4 * w, d, w) == pytest.approx(peak / 2)  # inverse square root decay
    assert max(inverse_sqrt(s, d, w) for s in range(1, 3 * w, 50)) <= peak
    assert inverse_sqrt(w, d, w, factor=2.0) == pytest.approx(2 * peak)


def test_warmup_cosine_schedule():
    assert warmup_cosine(0, 1e-3, 10, 100) == pytest.approx(1e-4)
    assert warmup_cosine(10, 1e-3, 10, 100) == pytest.approx(1e-3)
    assert warmup_cosine(55, 1e-3, 10, 100, min_lr=1e-4) == pytest.approx(5.5e-4)
    assert warmup_cosine(100, 1e-3, 10, 100, min_lr=1e-4) == pytest.approx(1e-4)
    assert warmup_cosine(500, 1e-3, 10, 100) == pytest.approx(0.0)
    # under a time budget: whichever of steps and clock is further along
    assert warmup_cosine(20, 1e-3, 10, 100, time_progress=0.5) == pytest.approx(5e-4)
    assert warmup_cosine(55, 1e-3, 10, 100, time_progress=0.1) == pytest.approx(5e-4)
    assert warmup_cosine(20, 1e-3, 10, 100, min_lr=1e-4, time_progress=1.0) == pytest.approx(1e-4)
    assert warmup_cosine(5, 1e-3, 10, 100, time_progress=0.9) == pytest.approx(5e-4)  # warmup: steps only


# ---- config ----

def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_load_config_with_overrides_and_round_trip(tmp_path):
    file = _write(tmp_path / "c.toml", '[model]\narch = "decoder"\nd_model = 64\nn_heads = 4\n[data]\ntrain_text = "x.txt"\n[train]\nmax_steps = 5\n')
    cfg = load_config(file, ["train.max_steps=7", "train.lr_factor=2", "data.valid_text=v.txt", "train.precision=bf16",
                             "decode.beam_size=2"])
    assert (cfg.train.max_steps, cfg.train.lr_factor, cfg.data.valid_text) == (7, 2, "v.txt")
    assert cfg.train.precision == "bf16" and cfg.decode.beam_size == 2 and cfg.model.arch == "decoder"
    again = load_config(_write(tmp_path / "resolved.toml", cfg.to_toml()))
    assert again == cfg


@pytest.mark.parametrize("override, message", [
    ("train.max_step=3", r"unknown key train\.max_step \(did you mean 'max_steps'\?\); valid keys: accumulate"),
    ("trian.seed=1", r"unknown section \[trian\] \(did you mean \[train\]\?\)"),
    ("model.d_modle=8", r"unknown key model\.d_modle \(did you mean 'd_model'\?\)"),
    ("train.precision=fp8", r"train\.precision='fp8' is not valid: choose one of 'auto', 'fp32', 'bf16', 'fp16'"),
    ("train.max_steps=\"ten\"", r"train\.max_steps='ten' is not valid: it must be int"),
    ("data.vocab_size=100", r"data\.vocab_size=100 is too small"),
    ("model.vocab_size=300", r"model\.vocab_size is set by the trained tokenizer"),
    ("model.arch=\"encoder\"", r"model\.arch='encoder' cannot be trained with objective 'seq2seq'"),
    ("noequals", r"write section\.key=value"),
])
def test_bad_config_values_are_one_line_errors(tmp_path, override, message):
    file = _write(tmp_path / "c.toml", '[data]\ntrain_src = "a"\ntrain_tgt = "b"\n')
    with pytest.raises(ConfigError, match=message) as info:
        load_config(file, [override])
    assert "\n" not in str(info.value)


# ---- training runs (tiny) ----

def _tiny(data_dir: Path, **train) -> RunConfig:
    values = {
        "model": {"d_model": 32, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1, "d_ff": 64,
                  "dropout": 0.1, "max_positions": 64},
        "data": {"train_src": str(data_dir / "train.src"), "train_tgt": str(data_dir / "train.tgt"),
                 "valid_src": str(data_dir / "valid.src"), "valid_tgt": str(data_dir / "valid.tgt"),
                 "vocab_size": 300, "max_len": 32},
        "train": {"batch_tokens": 256, "max_steps": 10, "warmup_steps": 5, "valid_every": 5, "save_every": 4,
                  "keep_last": 2, "log_every": 5, "precision": "fp32", **train},
        "decode": {"beam_size": 1},
    }
    return build_run_config(values)


@pytest.fixture(scope="module")
def copy_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("copy")
    write_copy_task(out, n_train=400, n_valid=20, n_test=20, n_symbols=10, max_len=8)
    return out


def _valid_records(run_dir: Path) -> list[dict]:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in records if r["split"] == "valid"]


def _losses(run_dir: Path) -> dict[int, float]:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in records if r["split"] == "train"}


def test_run_directory_layout_and_model_dirs(tmp_path, copy_data):
    result = train(_tiny(copy_data), tmp_path / "run", log=lambda _: None)
    run = tmp_path / "run"
    assert result.steps == 10
    assert (run / "config.toml").is_file() and (run / "tokenizer.json").is_file()
    assert [p.name for p in step_dirs(run)] == ["step-000008", "step-000010"]  # keep_last = 2
    assert not list((run / "checkpoints").glob(".*"))  # no temporary leftovers
    assert len(_losses(run)) == 10
    valid = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if '"valid"' in line]
    assert [r["step"] for r in valid] == [5, 10] and all(r["valid_ppl"] > 1 for r in valid)
    assert all(0 <= r["valid_bleu"] <= 100 and 0 <= r["valid_exact"] <= 1 for r in valid)  # greedy on the sample
    for name in ("best", "last"):
        model = load_model(run / name)
        src, tgt = load_tokenizers(run / name)
        assert src is tgt and model.config.vocab_size == src.vocab_size
        assert load_decode_config(run / name).beam_size == 1
    ckpt = step_dirs(run)[-1]
    assert {"optimizer.safetensors", "state.json", "model.safetensors", "config.json"} <= {p.name for p in ckpt.iterdir()}
    with pytest.raises(TrainError, match="already has checkpoints: pass --resume"):
        train(_tiny(copy_data), run, log=lambda _: None)


class Crash(Exception):
    pass


def crash_at(stop: int):
    """An on_step callback that raises Crash after step `stop` (a crash between two checkpoints)."""
    def on_step(step, record):
        if step == stop:
            raise Crash
    return on_step


def _steps(run_dir: Path, split: str) -> list[int]:
    """The raw sequence of steps of one split in metrics.jsonl: duplicates and gaps show."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r["step"] for r in records if r["split"] == split]


def test_resume_repeats_the_uninterrupted_losses_exactly(tmp_path, copy_data):
    """Stopped at step 6 (after the step-4 checkpoint), resumed: steps 5-10 repeat the full run's losses.

    The cut run's metrics.jsonl also ends in a torn line (a kill in the middle of a write):
    resume drops it, and the log reads as one run, each step once."""
    cfg = _tiny(copy_data)  # dropout 0.1: the RNG state must be restored too
    train(cfg, tmp_path / "full", log=lambda _: None)

    with pytest.raises(Crash):
        train(cfg, tmp_path / "cut", log=lambda _: None, on_step=crash_at(6))
    assert [p.name for p in step_dirs(tmp_path / "cut")] == ["step-000004"]
    metrics = tmp_path / "cut" / "metrics.jsonl"
    line = metrics.read_text().splitlines()[-1]
    with open(metrics, "a") as f:
        f.write(line[: len(line) // 2])  # half a record, no newline
    said = []
    train(cfg, tmp_path / "cut", resume=True, log=said.append)
    assert any(line.startswith("data: prepared corpus") for line in said)  # the arrays were reused, not rebuilt
    assert _steps(tmp_path / "cut", "train") == _steps(tmp_path / "full", "train") == list(range(1, 11))
    assert _steps(tmp_path / "cut", "valid") == _steps(tmp_path / "full", "valid") == [5, 10]
    full, resumed = _losses(tmp_path / "full"), _losses(tmp_path / "cut")
    assert resumed == full  # exactly equal, step for step
    a, b = load_model(tmp_path / "full" / "last"), load_model(tmp_path / "cut" / "last")
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q), name


def test_cosine_under_max_minutes_decays_on_the_clock_and_resumes_exactly(tmp_path, copy_data, monkeypatch):
    """A cosine with max_steps far away and a 60-second budget on a fake clock (1 s per step): after
    the warmup the rate follows the share of the budget spent, ends near min_lr when the budget does,
    and a run cut and resumed takes the same rates and losses step for step."""
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])

    def tick(step, record):
        now[0] += 1.0

    cfg = _tiny(copy_data, schedule="cosine", lr=1e-3, warmup_steps=3, max_steps=100000, max_minutes=1.0,
                valid_every=1000, save_every=10, keep_last=10)
    full = train(cfg, tmp_path / "full", log=lambda _: None, on_step=tick)
    records = [json.loads(line) for line in (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()]
    train_records = [r for r in records if r["split"] == "train"]
    assert 50 <= full.steps <= 60  # stopped by the clock, far before max_steps
    warmup_end = train_records[2]["elapsed_s"]  # the clock at the end of the warmup's last step
    for before, r in pairwise(train_records):  # the rate of step s+1 reads the clock at the end of step s
        progress = 0.0 if before["step"] < 3 else (before["elapsed_s"] - warmup_end) / (60 - warmup_end)
        assert r["lr"] == pytest.approx(warmup_cosine(r["step"], 1e-3, 3, 100000, 0.0, progress))
    lrs = [r["lr"] for r in train_records]
    assert lrs[2] == pytest.approx(1e-3) and all(a >= b for a, b in pairwise(lrs[2:]))
    assert lrs[-1] < 0.02 * 1e-3  # the decay ended with the budget, not at max_steps

    now[0] = 1000.0
    with pytest.raises(Crash):
        train(cfg, tmp_path / "cut", log=lambda _: None, on_step=lambda step, record: (tick(step, record),
                                                                                     crash_at(25)(step, record)))
    train(cfg, tmp_path / "cut", resume=True, log=lambda _: None, on_step=tick)
    cut = [json.loads(line) for line in (tmp_path / "cut" / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["lr"]) for r in cut if r["split"] == "train"] == [(r["step"], r["lr"]) for r in train_records]
    assert _losses(tmp_path / "cut") == _losses(tmp_path / "full")


@pytest.mark.slow
def test_resume_after_kill_9(tmp_path, copy_data):
    """A real crash: a training subprocess is killed with SIGKILL mid-run, then resumed in this process."""
    cfg_file = _write(tmp_path / "c.toml", _tiny(copy_data, max_steps=400, save_every=3, valid_every=1000,
                                                 num_threads=1).to_toml())
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.Popen([sys.executable, "-m", "transformer.cli", "train", str(cfg_file), "--out",
                             str(tmp_path / "cut")], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(step_dirs(tmp_path / "cut")) < 2 and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()
    killed_at = max(_losses(tmp_path / "cut"))
    assert 6 <= killed_at < 400
    cfg = load_config(cfg_file, [f"train.max_steps={killed_at + 3}"])
    torch.set_num_threads(1)
    try:
        train(cfg, tmp_path / "cut", resume=True, log=lambda _: None)
        train(cfg, tmp_path / "full", log=lambda _: None)
    finally:
        torch.set_num_threads(os.cpu_count() or 1)
    full, resumed = _losses(tmp_path / "full"), _losses(tmp_path / "cut")
    assert sorted(resumed) == list(range(1, killed_at + 4))
    for step in full:  # subprocess and this process: the same thread count, so exact equality is expected
        assert resumed[step] == pytest.approx(full[step], rel=1e-6, abs=0), step


def test_fine_tune_with_init_from_then_resume_repeats_the_uninterrupted_losses(tmp_path, copy_data):
    """train.init_from starts from a model directory (its weights, config and tokenizer, not the
    [model] section's); crashed after its step-4 checkpoint and resumed, the fine-tuning repeats the
    uninterrupted fine-tuning's losses exactly."""
    base = _tiny(copy_data, max_steps=6, valid_every=100, bleu_samples=0)
    base = build_run_config({**base.to_dict(), "model": {**base.to_dict()["model"], "d_model": 16, "d_ff": 32},
                             "data": {**base.to_dict()["data"], "vocab_size": 262}})  # [data] would give 270
    train(base, tmp_path / "base", log=lambda _: None)
    cfg = _tiny(copy_data, init_from=str(tmp_path / "base" / "last"), max_steps=6, valid_every=100, bleu_samples=0)
    train(cfg, tmp_path / "full", log=lambda _: None)

    with pytest.raises(Crash):
        train(cfg, tmp_path / "cut", log=lambda _: None, on_step=crash_at(5))
    assert [p.name for p in step_dirs(tmp_path / "cut")] == ["step-000004"]
    train(cfg, tmp_path / "cut", resume=True, log=lambda _: None)
    full, resumed = _losses(tmp_path / "full"), _losses(tmp_path / "cut")
    assert _steps(tmp_path / "cut", "train") == list(range(1, 7)) and resumed == full
    assert load_model(tmp_path / "cut" / "last").config.d_model == 16  # the init_from model's, not [model]'s 32
    assert load_tokenizers(tmp_path / "cut")[0].vocab_size == 262
    assert (tmp_path / "cut" / "tokenizer.json").read_bytes() == (tmp_path / "base" / "tokenizer.json").read_bytes()
    # the same first batch (same seed): the base model after 6 steps scores it better than a new model
    assert full[1] < _losses(tmp_path / "base")[1] - 1.0, (full[1], _losses(tmp_path / "base"))


@pytest.fixture(scope="module")
def four_step_run(copy_data, tmp_path_factory):
    """A finished 4-step run with checkpoints at steps 2 and 4, and its config."""
    run = tmp_path_factory.mktemp("four") / "run"
    cfg = _tiny(copy_data, max_steps=4, save_every=2, valid_every=100, bleu_samples=0)
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
def test_resume_from_a_damaged_checkpoint_is_one_line_naming_the_file_and_the_way_out(tmp_path, four_step_run, name,
                                                                                     damage):
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
    assert _steps(run, "train") == list(range(1, 7))


def test_resume_with_a_damaged_run_tokenizer_says_where_the_copies_are(tmp_path, four_step_run, capsys):
    run = tmp_path / "run"
    shutil.copytree(four_step_run[0], run)
    (run / "tokenizer.json").write_text('{"version": "1.0", "truncated', encoding="utf-8")
    cfg = _write(tmp_path / "c.toml", four_step_run[1].to_toml())
    assert cli_main(["train", str(cfg), "--resume", "--out", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"transformer train: error: {run / 'tokenizer.json'} is not a valid tokenizer.json")
    assert err.count("\n") == 1
    assert f"copy it back from {run / 'checkpoints'}/step-*/" in err
    shutil.copy(step_dirs(run)[-1] / "tokenizer.json", run / "tokenizer.json")  # the way out
    assert cli_main(["train", str(cfg), "--resume", "--set", "train.max_steps=5", "--out", str(run)]) == 0
    assert _steps(run, "train") == list(range(1, 6))


def test_max_epochs_stops_at_the_epoch_boundary(tmp_path, copy_data):
    """max_epochs = 2 (max_steps far away): every batch of epochs 0 and 1 is one step, then the run stops."""
    from transformer.training.corpora import prepare_data
    from transformer.training.distributed import DistInfo

    cfg = _tiny(copy_data, max_steps=100000, max_epochs=2, batch_tokens=1024, valid_every=100000, save_every=100000,
                bleu_samples=0)
    lines = []
    result = train(cfg, tmp_path / "run", log=lines.append)
    data = prepare_data(cfg, tmp_path / "run", DistInfo(0, 1, 0, torch.device("cpu")), lambda _: None, resume=True)
    per_epoch = [len(data.train_batches(epoch)) for epoch in (0, 1)]
    assert result.steps == sum(per_epoch) and per_epoch[0] > 1
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records if r["split"] == "train"] == [0] * per_epoch[0] + [1] * per_epoch[1]
    assert f"stopped at step {result.steps} (max_epochs)" in lines[-1]
    state = json.loads((step_dirs(tmp_path / "run")[-1] / "state.json").read_text())
    assert (state["step"], state["epoch"], state["position"]) == (result.steps, 2, 0)


def test_clip_norm_clips_the_global_gradient_norm(tmp_path, copy_data, monkeypatch):
    """clip_norm = 0.01 (far below the gradient's norm): every step clips, the norm after is 0.01,
    and training differs from no clipping; clip_norm = 0 never clips."""
    clip = torch.nn.utils.clip_grad_norm_
    seen = []

    def recording_clip(parameters, max_norm, *args, **kwargs):
        parameters = list(parameters)
        before = clip(parameters, max_norm, *args, **kwargs)
        after = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in parameters if p.grad is not None]))
        seen.append((max_norm, float(before), float(after)))
        return before

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", recording_clip)
    train(_tiny(copy_data, max_steps=4, clip_norm=0.01, valid_every=100, bleu_samples=0), tmp_path / "clip",
          log=lambda _: None)
    assert len(seen) == 4
    for max_norm, before, after in seen:
        assert max_norm == 0.01 and before > 0.1 and after == pytest.approx(0.01, rel=1e-4)
    seen[:] = []
    train(_tiny(copy_data, max_steps=4, valid_every=100, bleu_samples=0), tmp_path / "plain", log=lambda _: None)
    assert seen == []
    clipped, plain = _losses(tmp_path / "clip"), _losses(tmp_path / "plain")
    assert clipped[1] == plain[1] and clipped[4] != pytest.approx(plain[4], rel=1e-4)  # the same start, other updates


def test_average_checkpoints_and_cli(tmp_path, copy_data, capsys):
    train(_tiny(copy_data, max_steps=8, keep_last=3), tmp_path / "run", log=lambda _: None)
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


def test_language_model_bf16_and_separate_vocabularies(tmp_path, copy_data, monkeypatch):
    """bf16 really is used: every loss (training and validation) sees bf16 logits, and the losses
    differ from an fp32 run with the same seed, by little (the same run, in lower precision)."""
    import transformer.training.objectives.seq2seq as trainer

    def lm(precision: str) -> RunConfig:
        return build_run_config({
            "model": {"arch": "decoder", "d_model": 32, "n_heads": 2, "n_decoder_layers": 1, "d_ff": 64,
                      "norm_position": "pre", "max_positions": 64},
            "data": {"train_text": str(copy_data / "train.src"), "valid_text": str(copy_data / "valid.src"),
                     "vocab_size": 300, "max_len": 32},
            "train": {"batch_tokens": 256, "max_steps": 3, "valid_every": 100, "save_every": 100,
                      "precision": precision},
        })

    seen = []
    loss = trainer.label_smoothed_cross_entropy
    monkeypatch.setattr(trainer, "label_smoothed_cross_entropy",
                        lambda logits, *a: seen.append(logits.dtype) or loss(logits, *a))
    result = train(lm("bf16"), tmp_path / "lm", log=lambda _: None)
    assert result.best_valid_loss is not None and math.isfinite(result.best_valid_loss)
    assert len(seen) >= 4 and set(seen) == {torch.bfloat16}  # 3 steps and the validation
    seen[:] = []
    train(lm("fp32"), tmp_path / "lm32", log=lambda _: None)
    assert set(seen) == {torch.float32}
    bf16, fp32 = _losses(tmp_path / "lm"), _losses(tmp_path / "lm32")
    assert sorted(bf16) == sorted(fp32) == [1, 2, 3]
    assert all(bf16[s] != fp32[s] and bf16[s] == pytest.approx(fp32[s], rel=0.02) for s in fp32), (bf16, fp32)
    assert "valid_bleu" not in _valid_records(tmp_path / "lm")[-1]  # BLEU is for translation runs
    assert load_model(tmp_path / "lm" / "best").config.arch == "decoder"
    sep = _tiny(copy_data, max_steps=2, bleu_samples=0)
    sep = RunConfig(sep.model, sep.data.__class__(**{**sep.data.__dict__, "shared_vocab": False}), sep.train, sep.decode)
    train(sep, tmp_path / "sep", log=lambda _: None)
    src, tgt = load_tokenizers(tmp_path / "sep" / "best")
    assert src is not tgt
    assert "valid_bleu" not in _valid_records(tmp_path / "sep")[-1]  # bleu_samples = 0: off
    assert load_model(tmp_path / "sep" / "best").config.tgt_vocab_size == tgt.vocab_size


def test_max_minutes_stops_cleanly_and_writes_best(tmp_path, copy_data):
    """A budget of 0.06 s: one step, then the time is up. Validating every step, the step the budget
    ends on is validated once (not by the loop and again by the final validation)."""
    result = train(_tiny(copy_data, max_steps=100000, max_minutes=0.001, valid_every=1), tmp_path / "run",
                   log=lambda _: None)
    run = tmp_path / "run"
    assert 1 <= result.steps <= 3
    assert _steps(run, "train") == list(range(1, result.steps + 1))
    assert _steps(run, "valid") == list(range(1, result.steps + 1))  # each step once
    assert [p.name for p in step_dirs(run)] == [f"step-{result.steps:06d}"]
    last = load_model(run / "last")
    assert torch.equal(last.state_dict()["lm_head.weight"], load_model(step_dirs(run)[-1]).state_dict()["lm_head.weight"])
    assert (run / "best" / "model.safetensors").is_file()


def test_precision_auto_is_measured_logged_recorded_and_kept_on_resume(tmp_path, copy_data, monkeypatch):
    """precision = "auto": the (here faked) measurement decides; the run's header says what and why,
    config.toml and the checkpoints record it, the logits really are bf16 or fp32, and a resumed run
    keeps what its checkpoint recorded even where a new measurement would decide otherwise."""
    import transformer.runtime.precision
    import transformer.training.objectives.seq2seq as trainer

    seen = []
    loss = trainer.label_smoothed_cross_entropy
    monkeypatch.setattr(trainer, "label_smoothed_cross_entropy", lambda logits, *a: seen.append(logits.dtype) or loss(logits, *a))
    for speedup, precision, dtype in ((0.5, "fp32", torch.float32), (3.0, "bf16", torch.bfloat16)):
        monkeypatch.setattr(transformer.runtime.precision, "measure_bf16_speedup", lambda *a, s=speedup: s)
        monkeypatch.setenv("TRANSFORMER_PRECISION_CACHE", "0")
        lines, seen[:] = [], []
        run = tmp_path / precision
        with pytest.raises(Crash):
            train(_tiny(copy_data, precision="auto", max_steps=6, valid_every=100, bleu_samples=0), run,
                  log=lines.append, on_step=crash_at(5))
        header = next(line for line in lines if line.startswith("model: "))
        assert f"precision {precision} (bf16 measured {speedup:.2f}x fp32 on this CPU); attention " in header
        assert f'precision = "{precision}"' in (run / "config.toml").read_text()
        assert json.loads((step_dirs(run)[-1] / "state.json").read_text())["precision"] == precision
        assert set(seen) == {dtype}
        # resumed where the measurement now says the opposite: the run keeps its own precision
        monkeypatch.setattr(transformer.runtime.precision, "measure_bf16_speedup", lambda *a, s=speedup: 3.5 - s)
        lines, seen[:] = [], []
        train(_tiny(copy_data, precision="auto", max_steps=6, valid_every=100, bleu_samples=0), run, resume=True,
              log=lines.append)
        assert any(f"precision {precision} (as the run recorded it); " in line for line in lines)
        assert set(seen) == {dtype} and f'precision = "{precision}"' in (run / "config.toml").read_text()


def test_attention_auto_is_measured_used_recorded_and_kept_on_resume(tmp_path, copy_data, monkeypatch):
    """attention_impl = "auto": the (here faked) comparison at the objective's typical batch decides the
    path every attention layer trains with; the header says which and why, checkpoints record it, a
    resumed run keeps it, and the saved model still says "auto" (inference takes the fused kernel)."""
    import transformer.model.attention as attention
    import transformer.runtime.precision

    used = []
    for name in ("scaled_dot_product_attention", "fused_attention"):
        real = getattr(attention, name)
        monkeypatch.setattr(attention, name,
                            lambda *a, _real=real, _name=name, **kw: used.append(_name) or _real(*a, **kw))
    monkeypatch.setenv("TRANSFORMER_PRECISION_CACHE", "0")
    for speedup, impl, path in ((0.5, "fused", "fused_attention"), (3.0, "textbook", "scaled_dot_product_attention")):
        asked = []
        monkeypatch.setattr(transformer.runtime.precision, "measure_attention_speedup",
                            lambda *a, s=speedup, _asked=asked: _asked.append(a) or s)
        lines, used[:] = [], []
        run = tmp_path / impl
        cfg = _tiny(copy_data, max_steps=6, valid_every=100, bleu_samples=0)
        with pytest.raises(Crash):
            train(cfg, run, log=lines.append, on_step=crash_at(5))
        header = next(line for line in lines if line.startswith("model: "))
        assert f"; attention {impl} (textbook measured {speedup:.2f}x fused's training speed at " in header
        (rows, heads, length, head_dim, dtype), = asked
        assert (heads, head_dim, dtype) == (2, 16, torch.float32) and 1 <= length <= 10 and rows == 256 // length
        assert set(used) == {path}
        assert json.loads((step_dirs(run)[-1] / "state.json").read_text())["attention"] == impl
        assert json.loads((step_dirs(run)[-1] / "config.json").read_text())["attention_impl"] == "auto"
        monkeypatch.setattr(transformer.runtime.precision, "measure_attention_speedup", lambda *a, s=speedup: 3.5 - s)
        lines, used[:] = [], []
        train(cfg, run, resume=True, log=lines.append)
        assert any(f"; attention {impl} (as the run recorded it); allocator " in line for line in lines)
        assert set(used) == {path}


def test_every_file_a_run_and_average_write_is_readable_by_others(tmp_path, copy_data):
    """Weights included: safetensors replaces the temporary file with an owner-only one, so the mode
    is set after the write. Under umask 022 every file is 0644 and every directory 0755."""
    old = os.umask(0o022)
    try:
        train(_tiny(copy_data, max_steps=4), tmp_path / "run", log=lambda _: None)
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


# ---- CLI ----

def test_cli_data_copy_and_train_errors(tmp_path, capsys):
    assert cli_main(["data", "copy", "--out", str(tmp_path / "copy"), "--n-train", "50"]) == 0
    assert len((tmp_path / "copy" / "train.src").read_text().splitlines()) == 50
    cfg = _write(tmp_path / "c.toml", f'[data]\ntrain_src = "{tmp_path}/copy/train.src"\n'
                 f'train_tgt = "{tmp_path}/copy/missing.tgt"\n')
    assert cli_main(["train", str(cfg), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("transformer train: error: ") and "missing.tgt not found" in err and err.count("\n") == 1
    assert cli_main(["train", str(cfg), "--set", "train.precision=fp16", "--out", str(tmp_path / "r")]) == 2
    assert "fp16' needs a GPU" in capsys.readouterr().err or torch.cuda.is_available()
    assert cli_main(["train", str(cfg), "--resume", "--out", str(tmp_path / "none")]) == 2
    assert "no checkpoint to resume from" in capsys.readouterr().err
    (tmp_path / "a-file").write_text("keep me\n")
    for out in (tmp_path / "a-file", tmp_path / "a-file" / "run"):
        assert cli_main(["train", str(cfg), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err == f"transformer train: error: --out {out}: {tmp_path / 'a-file'} is a file, not a directory: " \
                      "choose another run directory\n"
    assert (tmp_path / "a-file").read_text() == "keep me\n"


@pytest.mark.slow
def test_torchrun_two_processes_match_one_process_with_the_same_global_batch(tmp_path, copy_data):
    """2 gloo processes x 1 batch per step == 1 process accumulating 2 batches: the same losses.

    Tolerance: relative 1e-4 per step (gradients are summed in a different order across processes,
    and the difference compounds a little through Adam over the steps).
    """
    cfg = _tiny(copy_data, max_steps=6, save_every=100, valid_every=100)
    cfg = build_run_config({**{k: v for k, v in cfg.to_dict().items()},
                            "model": {**cfg.to_dict()["model"], "dropout": 0.0}})
    file = _write(tmp_path / "ddp.toml", cfg.to_toml())
    env = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1", "TRANSFORMER_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           "-m", "transformer.cli", "train", str(file), "--out", str(tmp_path / "ddp")],
                          env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # rank 0 prepared the corpus once; both ranks mapped that one folder
    corpora = sorted(p.name for p in (tmp_path / "cache" / "corpora").iterdir())
    assert len(corpora) == 2 and corpora[1].startswith("tokenizer-"), corpora
    assert (proc.stdout + proc.stderr).count("data: preparing") == 1, proc.stdout
    single = load_config(file, ["train.accumulate=2"])
    train(single, tmp_path / "one", log=lambda _: None)
    ddp, one = _losses(tmp_path / "ddp"), _losses(tmp_path / "one")
    assert sorted(ddp) == sorted(one) == list(range(1, 7))
    for step in one:
        assert ddp[step] == pytest.approx(one[step], rel=1e-4), step
    records = [json.loads(line) for line in (tmp_path / "ddp" / "metrics.jsonl").read_text().splitlines()]
    tokens = {r["step"]: r["tokens"] for r in records if r["split"] == "train"}
    records = [json.loads(line) for line in (tmp_path / "one" / "metrics.jsonl").read_text().splitlines()]
    assert tokens == {r["step"]: r["tokens"] for r in records if r["split"] == "train"}  # the same global batches


@pytest.mark.slow
def test_torchrun_resume_repeats_the_uninterrupted_losses(tmp_path, copy_data):
    """2 gloo processes (dropout on: each process's RNG state is restored): a run stopped at its step-4
    checkpoint and resumed to step 6 repeats an uninterrupted 2-process 6-step run's losses."""
    cfg = _tiny(copy_data, max_steps=6, save_every=2, valid_every=100, bleu_samples=0)
    file = _write(tmp_path / "ddp.toml", cfg.to_toml())
    env = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}

    def torchrun(out: Path, *args: str) -> None:
        proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                               "-m", "transformer.cli", "train", str(file), "--out", str(out), *args],
                              env=env, capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, proc.stderr[-3000:]

    torchrun(tmp_path / "full")
    torchrun(tmp_path / "cut", "--set", "train.max_steps=4")
    assert [p.name for p in step_dirs(tmp_path / "cut")] == ["step-000002", "step-000004"]
    assert len(json.loads((step_dirs(tmp_path / "cut")[-1] / "state.json").read_text())["rng"]) == 2  # one per process
    torchrun(tmp_path / "cut", "--resume")
    full, resumed = _losses(tmp_path / "full"), _losses(tmp_path / "cut")
    assert _steps(tmp_path / "cut", "train") == list(range(1, 7)) and sorted(full) == list(range(1, 7))
    for step in full:
        assert resumed[step] == pytest.approx(full[step], rel=1e-6, abs=0), step


def test_bleu_sample_is_fixed_and_evenly_spread():
    assert bleu_sample(10, 4) == [0, 2, 5, 7]
    assert bleu_sample(3, 200) == [0, 1, 2] and bleu_sample(5, 5) == [0, 1, 2, 3, 4]  # all, when no more than asked
    assert bleu_sample(1000, 200) == list(range(0, 1000, 5))
    for n_valid, n in ((1000, 300), (997, 200), (201, 200), (7, 3)):
        sample = bleu_sample(n_valid, n)
        gaps = [b - a for a, b in pairwise(sample)]
        assert len(sample) == n and sample[0] == 0 and sample[-1] < n_valid, (n_valid, n)
        assert min(gaps) >= 1 and max(gaps) - min(gaps) <= 1, (n_valid, n, sorted(set(gaps)))  # sorted, evenly spread
        step = -(-n_valid // n)  # ceil(n_valid / n): no gap, nor the tail after the last index, is wider
        assert max(gaps) <= step and n_valid - sample[-1] <= step, (n_valid, n)


def test_preset_configs_load():
    presets = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.toml"))
    assert {p.stem for p in presets} >= {"copy", "base", "big", "cpu-translation", "lm"}
    for preset in presets:
        load_config(preset)
    big = load_config(presets[[p.stem for p in presets].index("big")])
    assert (big.model.d_model, big.model.d_ff, big.model.n_heads, big.model.dropout) == (1024, 4096, 16, 0.3)


def _greedy_exact_match(model_dir: Path, lines: list[str]) -> float:
    """Share of lines a trained copy model reproduces exactly with greedy decoding (a plain loop, no cache)."""
    model, (src_tok, tgt_tok) = load_model(model_dir), load_tokenizers(model_dir)
    c = model.config
    ids = [src_tok.encode(line) for line in lines]
    src = torch.full((len(ids), max(map(len, ids))), c.pad_id)
    for i, row in enumerate(ids):
        src[i, : len(row)] = torch.tensor(row)
    with torch.no_grad():
        memory, src_mask = model.encode(src)
        out = torch.full((len(ids), 1), c.start_id)
        done = torch.zeros(len(ids), dtype=torch.bool)
        for _ in range(src.size(1) + 5):
            step = model.decode(out, memory, src_mask)[:, -1].argmax(-1)  # (B,)
            step = torch.where(done, torch.full_like(step, c.pad_id), step)
            out = torch.cat([out, step[:, None]], dim=1)
            done |= step == c.eos_id
            if done.all():
                break
    decoded = tgt_tok.decode_batch(out[:, 1:].tolist())
    return sum(d == line for d, line in zip(decoded, lines, strict=True)) / len(lines)


@pytest.mark.slow
def test_copy_task_learns_to_copy_held_out_sequences(tmp_path):
    """configs/copy.toml's recipe on a smaller copy task (4,000 pairs), a fixed 450 steps.

    Greedy output reproduces at least 98 of 100 unseen sequences. Measured with training seeds
    1, 2, 3: 100% each at 450 steps with torch's fused attention; at 300 steps 98%, 99%, 100%. The
    path a machine trains with (bf16 or fp32, fused or textbook attention: both measured per CPU)
    changes the rounding, and with it a sequence or two (99% on the AMX Xeon with bf16 and the
    textbook path). A masking or target-shifting bug gives close to 0%. The full copy.toml run
    reaches 100% (README).
    """
    data = tmp_path / "copy"
    write_copy_task(data, n_train=4000, n_valid=50, n_test=100, n_symbols=10, max_len=8)
    overrides = [f"data.{split}_{side}={data}/{split}.{side}" for split in ("train", "valid") for side in ("src", "tgt")]
    cfg = load_config(Path(__file__).resolve().parents[2] / "configs" / "copy.toml",
                      overrides + ["train.max_steps=450", "train.batch_tokens=512", "train.warmup_steps=100",
                                   "train.valid_every=1000", "train.save_every=1000"])
    train(cfg, tmp_path / "run", log=lambda _: None)
    test_lines = (data / "test.src").read_text().splitlines()
    assert _greedy_exact_match(tmp_path / "run" / "best", test_lines) >= 0.98
    final = _valid_records(tmp_path / "run")[-1]  # validation BLEU: greedy_search, detokenised, vs the raw lines
    assert final["valid_exact"] >= 0.98 and final["valid_bleu"] >= 98.0


def test_resume_with_another_number_of_processes_is_a_clear_error(tmp_path, copy_data):
    """Exact resume restores each process's random state: a checkpoint of 2 processes cannot go on in 1."""
    train(_tiny(copy_data, max_steps=4), tmp_path / "run", log=lambda _: None)
    state_file = step_dirs(tmp_path / "run")[-1] / "state.json"
    state = json.loads(state_file.read_text())
    state["rng"] = state["rng"] * 2  # as a 2-process run writes it
    state_file.write_text(json.dumps(state))
    with pytest.raises(TrainError, match=r"was written by 2 process\(es\), this run has 1: resume with the same number"):
        train(_tiny(copy_data, max_steps=6), tmp_path / "run", resume=True, log=lambda _: None)


def test_cpu_training_keeps_freed_memory_and_gives_it_back_every_trim_steps_and_at_the_end(tmp_path, copy_data,
                                                                                          monkeypatch):
    """transformer.runtime.allocator: kept while training (the model: line says so), trimmed every TRIM_EVERY_STEPS steps
    so that the heap's fragments do not add up, and trimmed once more when training ends."""
    import transformer.training.trainer as trainer_module
    from transformer.runtime.allocator import AllocatorChoice

    asked, trims = [], []
    monkeypatch.setattr(trainer_module, "keep_freed_memory",
                        lambda device_type: asked.append(device_type) or AllocatorChoice(True, "glibc, in a test"))
    monkeypatch.setattr(trainer_module, "release_freed_memory", lambda: trims.append(1))
    monkeypatch.setattr(trainer_module, "TRIM_EVERY_STEPS", 4)
    lines = []
    train(_tiny(copy_data, max_steps=10, valid_every=100, save_every=100), tmp_path / "run", log=lines.append)
    assert asked == ["cpu"]
    assert any(line.startswith("model: ") and line.endswith("; allocator keeps freed memory (glibc, in a test)")
               for line in lines)
    assert len(trims) == 3  # steps 4 and 8, then the end


# ---- late dropout ----

def test_dropout_switch_turns_every_dropout_off_and_back_to_its_built_rate():
    from transformer.training.dropout import DropoutSwitch

    torch.manual_seed(0)
    model = build_model(cpu_tiny(dropout=0.1, attention_dropout=0.2, activation_dropout=0.3)).train()
    src, tgt = torch.randint(4, 64, (2, 7)), torch.randint(4, 64, (2, 6))
    built = [(type(m).__name__, getattr(m, "p", getattr(m, "dropout", None))) for m in model.modules()]
    switch = DropoutSwitch(model)
    assert {rate for _, _, rate in switch.rates} == {0.1, 0.2, 0.3}  # residual/embedding, attention, activation
    switch.set(False)
    assert all(getattr(module, name) == 0.0 for module, name, _ in switch.rates)
    off = model(src, tgt)
    assert torch.equal(off, model(src, tgt))  # no randomness left in a training-mode forward
    assert torch.equal(off, model.eval()(src, tgt))  # ... it is the eval-mode forward
    model.train()
    switch.set(True)
    assert [(type(m).__name__, getattr(m, "p", getattr(m, "dropout", None))) for m in model.modules()] == built
    assert not torch.equal(model(src, tgt), off)


def test_late_dropout_trains_the_first_share_without_dropout_then_with_it(tmp_path, copy_data):
    """late_dropout 0.5 of 10 steps: updates 1-5 repeat a run built without dropout loss for loss, 6-10
    do not; the log says where it switched."""
    said = []
    train(_tiny(copy_data, late_dropout=0.5), tmp_path / "late", log=said.append)
    none = _tiny(copy_data)
    train(dataclasses.replace(none, model=dataclasses.replace(none.model, dropout=0.0)), tmp_path / "none",
          log=lambda _: None)
    train(_tiny(copy_data), tmp_path / "always", log=lambda _: None)
    late, without, always = _losses(tmp_path / "late"), _losses(tmp_path / "none"), _losses(tmp_path / "always")
    assert [late[s] for s in range(1, 6)] == [without[s] for s in range(1, 6)]
    assert all(late[s] != without[s] for s in range(6, 11))
    assert late[1] != always[1]
    assert [line for line in said if "dropout on" in line] == [
        "step 6: dropout on (50% of the budget spent; train.late_dropout)"]
    assert json.loads((tmp_path / "late" / "last" / "config.json").read_text())["dropout"] == 0.1


@pytest.mark.parametrize("cut", [5, 9])  # resumed from step 4 (dropout still off) and from step 8 (on)
def test_late_dropout_resumes_exactly(tmp_path, copy_data, cut):
    cfg = _tiny(copy_data, late_dropout=0.5)
    train(cfg, tmp_path / "full", log=lambda _: None)
    with pytest.raises(Crash):
        train(cfg, tmp_path / "cut", log=lambda _: None, on_step=crash_at(cut))
    train(cfg, tmp_path / "cut", resume=True, log=lambda _: None)
    assert _losses(tmp_path / "cut") == _losses(tmp_path / "full")


def test_late_dropout_outside_0_1_is_a_clear_error(copy_data):
    with pytest.raises(ConfigError, match=r"train.late_dropout=1.0 is not valid: it must be a number in \[0, 1\)"):
        _tiny(copy_data, late_dropout=1.0)
