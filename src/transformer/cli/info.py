"""`transformer info`: a model directory's config, parameter count and FLOPs per token (or per
image, or per second of audio). The handler is `info`; its parser is derived from its signature."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Annotated

from .args import Arg, command
from .common import (
    MODEL_DIR,
    POSITIVE,
)


def info(
    model_dir: MODEL_DIR,
    seq_len: Annotated[
        int,
        Arg(
            "sequence length for the FLOP count (default 128; an image model counts per image)",
            POSITIVE,
            "a positive sequence length",
        ),
    ] = 128,
) -> None:
    """Print a model directory's config, parameter count and FLOPs per token (or per image)."""
    from ..model.accounting import count_parameters
    from ..model_dir import load_config, load_model
    from ..model_records import PIXELS_FILE, load_languages, load_task
    from ..tasks import model_task

    config = load_config(model_dir)
    model = load_model(model_dir)
    languages = load_languages(model_dir)
    print(f"model directory: {model_dir}")
    if languages is not None:
        print(f"translates: {languages['source']} -> {languages['target']}")
    print("config:")
    for key, value in config.to_dict().items():
        print(f"  {key} = {value}")
    total = count_parameters(model)
    print(f"parameters: {total:,} ({total / 1e6:.2f}M; tied matrices counted once)")
    task = model_task(config, (Path(model_dir) / PIXELS_FILE).is_file(), load_task(model_dir))
    for line in task.cost(config, seq_len):
        print(line)
    _adapters(model_dir, total)


def _adapters(model_dir: str, total: int) -> None:
    """What a LoRA model directory adds to its base, before its adapters are merged."""
    from ..model.lora import lora_flops, lora_layers
    from ..model_dir import ADAPTER_FILE, load_model

    if not (Path(model_dir) / ADAPTER_FILE).is_file():
        return
    model = load_model(model_dir, merge=False)
    a, layers = model.adapter, lora_layers(model)
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    added = sum(lora_flops(m.in_features, m.out_features, m.rank) for m in layers)
    print(
        f"LoRA adapters on {a.base}: rank {a.lora.rank}, alpha {a.lora.alpha:g} on "
        f"{len(layers)} products ({', '.join(a.lora.targets)}); {trained:,} trained parameters "
        f"({trained / total:.2%} of the model); unmerged they add {added:,} forward FLOPs per "
        "token through all of them (merged, as the counts above: none)"
    )


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer info`."""
    command(sub, "info", info, help="print a model directory's config, parameters and FLOPs/token")
