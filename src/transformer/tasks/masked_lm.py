"""Masked language modelling (BERT): an encoder trained to restore masked tokens; its models are
the encoders other tasks fine-tune (`train.init_from`). Scored by its validation loss."""

from __future__ import annotations

from pathlib import Path

from ..config import ModelConfig, RunConfig
from .base import Task


def runs(model: ModelConfig, pixels: bool) -> bool:
    return model.arch == "encoder"


def prepare(config: RunConfig, run_dir: Path, dist, say, resume: bool):
    from ..training.corpora import prepare_data
    from ..training.objectives import MaskedLM
    from ..training.objectives.encoder import init_dir

    data = prepare_data(config, run_dir, dist, say, resume)
    return MaskedLM(config, data, init_dir(config, run_dir, resume))


TASK = Task(
    name="masked-lm",
    summary="masked language modelling: an encoder that restores hidden tokens (BERT)",
    described="an encoder without classes",
    objectives=("mlm",),
    family="encoder",
    runs=runs,
    prepare=prepare,
)
