"""The training loop (training/trainer.py): the run directory, exact resume (after a crash, a
kill -9, from init_from), the budget's ends (max_epochs, max_minutes), clipping, bf16, the CLI."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from transformer.cli import main as cli_main
from transformer.config import RunConfig, build_run_config, load_config
from transformer.data.sources.copy import write_copy_task
from transformer.model_dir import load_model, load_tokenizers
from transformer.model_records import load_decode_config
from transformer.training.checkpoint import step_dirs
from transformer.training.trainer import TrainError, train

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_run_directory_layout_and_model_dirs(tmp_path, tiny, runs):
    result = train(tiny(), tmp_path / "run", log=lambda _: None)
    run = tmp_path / "run"
    assert result.steps == 10
    assert (run / "config.toml").is_file() and (run / "tokenizer.json").is_file()
    assert [p.name for p in step_dirs(run)] == ["step-000008", "step-000010"]  # keep_last = 2
    assert not list((run / "checkpoints").glob(".*"))  # no temporary leftovers
    assert len(runs.losses(run)) == 10
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
        train(tiny(), run, log=lambda _: None)


def test_resume_repeats_the_uninterrupted_losses_exactly(tmp_path, tiny, runs):
    """Stopped at step 6 (after the step-4 checkpoint), resumed: steps 5-10 repeat the full run's losses.

    The cut run's metrics.jsonl also ends in a torn line (a kill in the middle of a write):
    resume drops it, and the log reads as one run, each step once."""
    cfg = tiny()  # dropout 0.1: the RNG state must be restored too
    train(cfg, tmp_path / "full", log=lambda _: None)

    with pytest.raises(runs.Crash):
        train(cfg, tmp_path / "cut", log=lambda _: None, on_step=runs.crash_at(6))
    assert [p.name for p in step_dirs(tmp_path / "cut")] == ["step-000004"]
    metrics = tmp_path / "cut" / "metrics.jsonl"
    line = metrics.read_text().splitlines()[-1]
    with open(metrics, "a") as f:
        f.write(line[: len(line) // 2])  # half a record, no newline
    said = []
    train(cfg, tmp_path / "cut", resume=True, log=said.append)
    assert any(line.startswith("data: prepared corpus") for line in said)  # the arrays were reused, not rebuilt
    assert runs.steps(tmp_path / "cut", "train") == runs.steps(tmp_path / "full", "train") == list(range(1, 11))
    assert runs.steps(tmp_path / "cut", "valid") == runs.steps(tmp_path / "full", "valid") == [5, 10]
    full, resumed = runs.losses(tmp_path / "full"), runs.losses(tmp_path / "cut")
    assert resumed == full  # exactly equal, step for step
    a, b = load_model(tmp_path / "full" / "last"), load_model(tmp_path / "cut" / "last")
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q), name


@pytest.mark.slow
def test_resume_after_kill_9(tmp_path, tiny, runs):
    """A real crash: a training subprocess is killed with SIGKILL mid-run, then resumed in this process."""
    cfg_file = runs.write_config(tmp_path / "c.toml", tiny(max_steps=400, save_every=3, valid_every=1000,
                                                 num_threads=1))
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.Popen([sys.executable, "-m", "transformer.cli", "train", str(cfg_file), "--out",
                             str(tmp_path / "cut")], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(step_dirs(tmp_path / "cut")) < 2 and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()
    killed_at = max(runs.losses(tmp_path / "cut"))
    assert 6 <= killed_at < 400
    cfg = load_config(cfg_file, [f"train.max_steps={killed_at + 3}"])
    torch.set_num_threads(1)
    try:
        train(cfg, tmp_path / "cut", resume=True, log=lambda _: None)
        train(cfg, tmp_path / "full", log=lambda _: None)
    finally:
        torch.set_num_threads(os.cpu_count() or 1)
    full, resumed = runs.losses(tmp_path / "full"), runs.losses(tmp_path / "cut")
    assert sorted(resumed) == list(range(1, killed_at + 4))
    for step in full:  # subprocess and this process: the same thread count, so exact equality is expected
        assert resumed[step] == pytest.approx(full[step], rel=1e-6, abs=0), step


def test_fine_tune_with_init_from_then_resume_repeats_the_uninterrupted_losses(tmp_path, tiny, runs):
    """train.init_from starts from a model directory (its weights, config and tokenizer, not the
    [model] section's); crashed after its step-4 checkpoint and resumed, the fine-tuning repeats the
    uninterrupted fine-tuning's losses exactly."""
    base = tiny(max_steps=6, valid_every=100, bleu_samples=0)
    base = build_run_config({**base.to_dict(), "model": {**base.to_dict()["model"], "d_model": 16, "d_ff": 32},
                             "data": {**base.to_dict()["data"], "vocab_size": 262}})  # [data] would give 270
    train(base, tmp_path / "base", log=lambda _: None)
    cfg = tiny(init_from=str(tmp_path / "base" / "last"), max_steps=6, valid_every=100, bleu_samples=0)
    train(cfg, tmp_path / "full", log=lambda _: None)

    with pytest.raises(runs.Crash):
        train(cfg, tmp_path / "cut", log=lambda _: None, on_step=runs.crash_at(5))
    assert [p.name for p in step_dirs(tmp_path / "cut")] == ["step-000004"]
    train(cfg, tmp_path / "cut", resume=True, log=lambda _: None)
    full, resumed = runs.losses(tmp_path / "full"), runs.losses(tmp_path / "cut")
    assert runs.steps(tmp_path / "cut", "train") == list(range(1, 7)) and resumed == full
    assert load_model(tmp_path / "cut" / "last").config.d_model == 16  # the init_from model's, not [model]'s 32
    assert load_tokenizers(tmp_path / "cut")[0].vocab_size == 262
    assert (tmp_path / "cut" / "tokenizer.json").read_bytes() == (tmp_path / "base" / "tokenizer.json").read_bytes()
    # the same first batch (same seed): the base model after 6 steps scores it better than a new model
    assert full[1] < runs.losses(tmp_path / "base")[1] - 1.0, (full[1], runs.losses(tmp_path / "base"))


def test_max_epochs_stops_at_the_epoch_boundary(tmp_path, tiny):
    """max_epochs = 2 (max_steps far away): every batch of epochs 0 and 1 is one step, then the run stops."""
    from transformer.training.corpora import prepare_data
    from transformer.training.distributed import DistInfo

    cfg = tiny(max_steps=100000, max_epochs=2, batch_tokens=1024, valid_every=100000, save_every=100000,
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


def test_clip_norm_clips_the_global_gradient_norm(tmp_path, monkeypatch, tiny, runs):
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
    train(tiny(max_steps=4, clip_norm=0.01, valid_every=100, bleu_samples=0), tmp_path / "clip",
          log=lambda _: None)
    assert len(seen) == 4
    for max_norm, before, after in seen:
        assert max_norm == 0.01 and before > 0.1 and after == pytest.approx(0.01, rel=1e-4)
    seen[:] = []
    train(tiny(max_steps=4, valid_every=100, bleu_samples=0), tmp_path / "plain", log=lambda _: None)
    assert seen == []
    clipped, plain = runs.losses(tmp_path / "clip"), runs.losses(tmp_path / "plain")
    assert clipped[1] == plain[1] and clipped[4] != pytest.approx(plain[4], rel=1e-4)  # the same start, other updates


def test_language_model_bf16_and_separate_vocabularies(tmp_path, copy_data, monkeypatch, tiny, runs):
    """bf16 really is used: every loss (training and validation) sees bf16 logits, and the losses
    differ from an fp32 run with the same seed, by little (the same run, in lower precision)."""
    import transformer.training.objectives.seq2seq as trainer  # its loss serves the packed lm too

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
                        lambda logits, *a, **k: seen.append(logits.dtype) or loss(logits, *a, **k))
    result = train(lm("bf16"), tmp_path / "lm", log=lambda _: None)
    assert result.best_valid_loss is not None and math.isfinite(result.best_valid_loss)
    assert len(seen) >= 4 and set(seen) == {torch.bfloat16}  # 3 steps and the validation
    seen[:] = []
    train(lm("fp32"), tmp_path / "lm32", log=lambda _: None)
    assert set(seen) == {torch.float32}
    bf16, fp32 = runs.losses(tmp_path / "lm"), runs.losses(tmp_path / "lm32")
    assert sorted(bf16) == sorted(fp32) == [1, 2, 3]
    assert all(bf16[s] != fp32[s] and bf16[s] == pytest.approx(fp32[s], rel=0.02) for s in fp32), (bf16, fp32)
    assert "valid_bleu" not in runs.valid_records(tmp_path / "lm")[-1]  # BLEU is for translation runs
    assert load_model(tmp_path / "lm" / "best").config.arch == "decoder"
    sep = tiny(max_steps=2, bleu_samples=0)
    sep = RunConfig(sep.model, sep.data.__class__(**{**sep.data.__dict__, "shared_vocab": False}), sep.train, sep.decode)
    train(sep, tmp_path / "sep", log=lambda _: None)
    src, tgt = load_tokenizers(tmp_path / "sep" / "best")
    assert src is not tgt
    assert "valid_bleu" not in runs.valid_records(tmp_path / "sep")[-1]  # bleu_samples = 0: off
    assert load_model(tmp_path / "sep" / "best").config.tgt_vocab_size == tgt.vocab_size


def test_max_minutes_stops_cleanly_and_writes_best(tmp_path, tiny, runs):
    """A budget of 0.06 s: one step, then the time is up. Validating every step, the step the budget
    ends on is validated once (not by the loop and again by the final validation)."""
    result = train(tiny(max_steps=100000, max_minutes=0.001, valid_every=1), tmp_path / "run",
                   log=lambda _: None)
    run = tmp_path / "run"
    assert 1 <= result.steps <= 3
    assert runs.steps(run, "train") == list(range(1, result.steps + 1))
    assert runs.steps(run, "valid") == list(range(1, result.steps + 1))  # each step once
    assert [p.name for p in step_dirs(run)] == [f"step-{result.steps:06d}"]
    last = load_model(run / "last")
    assert torch.equal(last.state_dict()["lm_head.weight"], load_model(step_dirs(run)[-1]).state_dict()["lm_head.weight"])
    assert (run / "best" / "model.safetensors").is_file()


def test_cli_data_copy_and_train_errors(tmp_path, capsys):
    assert cli_main(["data", "copy", "--out", str(tmp_path / "copy"), "--n-train", "50"]) == 0
    assert len((tmp_path / "copy" / "train.src").read_text().splitlines()) == 50
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[data]\ntrain_src = "{tmp_path}/copy/train.src"\n'
                   f'train_tgt = "{tmp_path}/copy/missing.tgt"\n', encoding="utf-8")
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
def test_copy_task_learns_to_copy_held_out_sequences(tmp_path, runs):
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
    final = runs.valid_records(tmp_path / "run")[-1]  # validation BLEU: greedy_search, detokenised, vs the raw lines
    assert final["valid_exact"] >= 0.98 and final["valid_bleu"] >= 98.0
