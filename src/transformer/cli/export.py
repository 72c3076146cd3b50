"""`transformer export`: a model directory out to CTranslate2, Hugging Face, GGUF or a plain model
directory (LoRA adapters merged on the way out). The handler is `export`; its parser is derived
from its signature (cli.args)."""

from __future__ import annotations

import argparse
from typing import Annotated, Literal

from .args import Arg, command
from .common import MODEL_DIR


def export(
    model_dir: MODEL_DIR,
    to: Annotated[
        Literal["ct2", "hf", "gguf", "dir"],
        Arg(
            "ct2: CTranslate2 (any encoder-decoder or decoder-only model we train); hf: Hugging "
            "Face transformers (Marian, GPT-2, Llama or BERT layouts); gguf: one file for "
            "llama.cpp and Ollama (decoder-only Llama or GPT-2 layouts, byte-level BPE); dir: a "
            "model directory with LoRA adapters merged into its weights (no base model needed)"
        ),
    ],
    out: Annotated[
        str,
        Arg(
            "the directory to write (must not exist, or be empty); for gguf the file to write "
            "(model.gguf, must not exist)"
        ),
    ],
    quantization: Annotated[
        str | None,
        Arg(
            "ct2: weights as int8, int8_float32, int16, float16, bfloat16, ... (default "
            "float32); gguf: f32 (default), f16 or q8_0"
        ),
    ] = None,
    lora_scale: Annotated[
        float | None,
        Arg(
            "dir: multiply the LoRA adapters' updates by this before merging them (0: the base "
            "model, 1: as trained, between: a model between the two, as WiSE-FT interpolates)"
        ),
    ] = None,
) -> None:
    """Write a model directory as a CTranslate2 (--to ct2), Hugging Face (--to hf) or GGUF
    (--to gguf) model, or as a model directory with its LoRA adapters merged (--to dir)."""
    from ..export.targets import export_model, usage

    written = export_model(model_dir, to, out, quantization=quantization, lora_scale=lora_scale)
    print(f"wrote {written} ({to}): {usage(to, written)}")


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer export`."""
    command(
        sub,
        "export",
        export,
        help="write a model directory as a CTranslate2, Hugging Face or GGUF model, or merge its "
        "LoRA adapters into a plain model directory",
    )
