"""`torchrun --nproc_per_node=1 -m transformer train` with train.device = "cuda": the run finishes
on the GPU through the DDP path (as tests/training/test_distributed.py launches torchrun on the
CPU).

What is seen from outside: the trainer's header line ("device cuda:0, 1 process(es) (process group
nccl)": under torchrun even one process joins the process group and trains under DDP), the steps
in metrics.jsonl, and the CUDA generator's state in the checkpoint (recorded only once CUDA is in
use).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.training.conftest import Runs, tiny_config
from transformer.training.checkpoint import step_dirs

pytestmark = pytest.mark.cuda

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_torchrun_one_process_trains_on_the_device(tmp_path, copy_data, device, dry_run):
    config = tiny_config(
        copy_data, max_steps=6, save_every=100, valid_every=100, bleu_samples=0, device=device.type
    )
    file = Runs.write_config(tmp_path / "run.toml", config)
    path = os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH")) if p)
    env = {
        **os.environ,
        "PYTHONPATH": path,
        "OMP_NUM_THREADS": "1",
        "TRANSFORMER_CACHE_DIR": str(tmp_path / "cache"),
    }
    run = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=1",
            "-m",
            "transformer",
            "train",
            str(file),
            "--out",
            str(run),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    where, backend = ("cpu", "gloo") if dry_run else ("cuda:0", "nccl")
    assert f"; device {where}, 1 process(es) (process group {backend})" in output, output[-3000:]
    assert Runs.steps(run, "train") == list(range(1, 7))
    (rng,) = json.loads((step_dirs(run)[-1] / "state.json").read_text())["rng"]
    assert ("cuda" in rng) == (not dry_run)  # CUDA tensors were made: its generator was recorded
