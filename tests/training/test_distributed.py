"""Data-parallel training under torchrun (training/distributed.py): 2 gloo processes match one
process with the same global batch, and resume exactly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from transformer.config import build_run_config, load_config
from transformer.training.checkpoint import step_dirs
from transformer.training.trainer import train

SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.mark.slow
def test_torchrun_two_processes_match_one_process_with_the_same_global_batch(tmp_path, tiny, runs):
    """2 gloo processes x 1 batch per step == 1 process accumulating 2 batches: the same losses.

    Tolerance: relative 1e-4 per step (gradients are summed in a different order across processes,
    and the difference compounds a little through Adam over the steps).
    """
    cfg = tiny(max_steps=6, save_every=100, valid_every=100)
    cfg = build_run_config({**{k: v for k, v in cfg.to_dict().items()},
                            "model": {**cfg.to_dict()["model"], "dropout": 0.0}})
    file = runs.write_config(tmp_path / "ddp.toml", cfg)
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
    ddp, one = runs.losses(tmp_path / "ddp"), runs.losses(tmp_path / "one")
    assert sorted(ddp) == sorted(one) == list(range(1, 7))
    for step in one:
        assert ddp[step] == pytest.approx(one[step], rel=1e-4), step
    records = [json.loads(line) for line in (tmp_path / "ddp" / "metrics.jsonl").read_text().splitlines()]
    tokens = {r["step"]: r["tokens"] for r in records if r["split"] == "train"}
    records = [json.loads(line) for line in (tmp_path / "one" / "metrics.jsonl").read_text().splitlines()]
    assert tokens == {r["step"]: r["tokens"] for r in records if r["split"] == "train"}  # the same global batches


@pytest.mark.slow
def test_torchrun_resume_repeats_the_uninterrupted_losses(tmp_path, tiny, runs):
    """2 gloo processes (dropout on: each process's RNG state is restored): a run stopped at its step-4
    checkpoint and resumed to step 6 repeats an uninterrupted 2-process 6-step run's losses."""
    cfg = tiny(max_steps=6, save_every=2, valid_every=100, bleu_samples=0)
    file = runs.write_config(tmp_path / "ddp.toml", cfg)
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
    full, resumed = runs.losses(tmp_path / "full"), runs.losses(tmp_path / "cut")
    assert runs.steps(tmp_path / "cut", "train") == list(range(1, 7)) and sorted(full) == list(range(1, 7))
    for step in full:
        assert resumed[step] == pytest.approx(full[step], rel=1e-6, abs=0), step


@pytest.mark.slow
def test_torchrun_one_process_joins_the_group_and_matches_a_plain_run(tmp_path, tiny, runs):
    """Under torchrun one process takes the multi-process path (a gloo group, DDP): the same losses
    as the same run started without torchrun, and the header names the group."""
    cfg = tiny(max_steps=4, save_every=100, valid_every=100, bleu_samples=0)
    file = runs.write_config(tmp_path / "one.toml", cfg)
    env = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1",
                           "-m", "transformer.cli", "train", str(file), "--out", str(tmp_path / "ddp")],
                          env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "device cpu, 1 process(es) (process group gloo)" in proc.stdout + proc.stderr
    lines = []
    train(load_config(file), tmp_path / "plain", log=lines.append)
    assert not any("process group" in line for line in lines)
    ddp, plain = runs.losses(tmp_path / "ddp"), runs.losses(tmp_path / "plain")
    assert sorted(ddp) == sorted(plain) == [1, 2, 3, 4]
    for step in plain:
        assert ddp[step] == pytest.approx(plain[step], rel=1e-6), step
