"""What the training tests share: a small copy task, a tiny run config on it, and `runs`: reading a
run's metrics.jsonl and crashing a run on purpose between two checkpoints."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from transformer.config import RunConfig, build_run_config
from transformer.data.sources.copy import write_copy_task


@pytest.fixture(scope="session")
def copy_data(tmp_path_factory) -> Path:
    """A copy task: 400 training and 20 validation pairs of up to 8 of 10 symbols."""
    out = tmp_path_factory.mktemp("copy")
    write_copy_task(out, n_train=400, n_valid=20, n_test=20, n_symbols=10, max_len=8)
    return out


def tiny_config(data_dir: Path, **train) -> RunConfig:
    """A 1+1-layer d_model 32 translation run on the copy task: 10 steps, validated at 5 and 10,
    checkpoints every 4 (the last 2 kept); train values override."""
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


@pytest.fixture(scope="session")
def tiny(copy_data) -> Callable[..., RunConfig]:
    """tiny(**train): tiny_config on the copy task."""
    return lambda **train: tiny_config(copy_data, **train)


class Crash(Exception):
    """What runs.crash_at raises: a crash between two checkpoints."""


class Runs:
    """Reading a run directory's metrics.jsonl, and crashing a run on purpose."""

    Crash = Crash

    @staticmethod
    def crash_at(stop: int) -> Callable[[int, dict], None]:
        """An on_step callback that raises Crash after step `stop` (a crash between two checkpoints)."""
        def on_step(step, record):
            if step == stop:
                raise Crash
        return on_step

    @staticmethod
    def records(run_dir: Path) -> list[dict]:
        return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]

    @staticmethod
    def losses(run_dir: Path) -> dict[int, float]:
        """Each training step's loss."""
        return {r["step"]: r["loss"] for r in Runs.records(run_dir) if r["split"] == "train"}

    @staticmethod
    def steps(run_dir: Path, split: str) -> list[int]:
        """The raw sequence of steps of one split in metrics.jsonl: duplicates and gaps show."""
        return [r["step"] for r in Runs.records(run_dir) if r["split"] == split]

    @staticmethod
    def valid_records(run_dir: Path) -> list[dict]:
        return [r for r in Runs.records(run_dir) if r["split"] == "valid"]

    @staticmethod
    def write_config(path: Path, config: RunConfig) -> Path:
        """The config as a TOML file (what `transformer train` reads)."""
        path.write_text(config.to_toml(), encoding="utf-8")
        return path


@pytest.fixture(scope="session")
def runs() -> type[Runs]:
    return Runs
