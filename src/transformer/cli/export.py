"""`transformer export`: a model directory out to CTranslate2, Hugging Face or GGUF (LoRA
adapters merged on the way out). The handler is `export`; its parser is derived from its signature
(cli.args)."""

from __future__ import annotations

import argparse
from typing import Annotated, Literal

from .args import Arg, command
from .common import MODEL_DIR


def export(
    model_dir: MODEL_DIR,
    to: Annotated[
        Literal["ct2", "hf"],
        Arg(
            "ct2: CTranslate2 (any encoder-decoder or decoder-only model we train); hf: Hugging "
            "Face transformers (Marian, GPT-2, Llama or BERT layouts)"
        ),
    ],
    out: Annotated[str, Arg("the directory to write (must not exist, or be empty)")],
    quantization: Annotated[
        str | None,
        Arg(
            "ct2 only: weights as int8, int8_float32, int16, float16, bfloat16, ... (default "
            "float32)"
        ),
    ] = None,
) -> None:
    """Write a model directory as a CTranslate2 (--to ct2) or Hugging Face (--to hf) model."""
    from ..export import export_model

    written = export_model(model_dir, to, out, quantization=quantization)
    print(f"wrote {written} ({to}): see {written}/README.md for how to run it")


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer export`."""
    command(
        sub,
        "export",
        export,
        help="write a model directory as a CTranslate2 or Hugging Face model",
    )
