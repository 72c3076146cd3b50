"""export_model: a model directory to one of the targets (ct2, hf, gguf, or a model directory
with its LoRA adapters merged), and `usage`, how to run what it wrote.

The rules: every export is of the merged model (model_dir.load_model merges a LoRA model's
adapters); --lora-scale applies to `dir` only, --quantization to ct2 and gguf only; an image
generator (pixels as tokens) has no export.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from .common import ExportError, write_directory

TARGETS = ("ct2", "hf", "gguf", "dir")


def export_model(
    model_dir: str | os.PathLike,
    to: str,
    out: str | os.PathLike,
    quantization: str | None = None,
    lora_scale: float | None = None,
) -> Path:
    """Export the model directory `model_dir` to `out` as a CTranslate2 ("ct2"), Hugging Face
    ("hf") or GGUF ("gguf": `out` is the file) model, or as a model directory ("dir") with its
    LoRA adapters merged, their updates times `lora_scale` (None: 1, as trained)."""
    from ..model_dir import ADAPTER_FILE
    from ..model_records import PIXELS_FILE

    if lora_scale is not None:
        if to != "dir":
            raise ExportError(
                f"--lora-scale applies to --to dir: write the scaled model directory first, then "
                f"export that one --to {to}"
            )
        if not (Path(model_dir) / ADAPTER_FILE).is_file():
            raise ExportError(
                f"--lora-scale scales LoRA adapters, and {model_dir} has none ({ADAPTER_FILE}): "
                "leave it out"
            )
        if not (math.isfinite(lora_scale) and lora_scale >= 0):
            raise ExportError(
                f"--lora-scale {lora_scale}: give a number >= 0 (0: the base model, 1: as trained)"
            )

    if (Path(model_dir) / PIXELS_FILE).is_file():
        raise ExportError(
            f"an image generator (its {PIXELS_FILE}: pixels as tokens) cannot be exported: "
            "CTranslate2, Hugging Face and llama.cpp would read its tokens as text; use the model "
            "directory itself (transformer generate --image, Pipeline.generate_images)"
        )
    match to:
        case "ct2":
            from .ct2 import export_ct2

            return export_ct2(model_dir, out, quantization=quantization)
        case "hf":
            if quantization is not None:
                raise ExportError(
                    "--quantization applies to --to ct2 and --to gguf only: Hugging Face exports "
                    "keep float32 weights"
                )
            from .hf import export_hf

            return export_hf(model_dir, out)
        case "gguf":
            from .gguf import export_gguf

            return export_gguf(model_dir, out, quantization=quantization)
        case "dir":
            if quantization is not None:
                raise ExportError(
                    "--quantization applies to --to ct2 and --to gguf only: a model directory "
                    "keeps float32 weights (quantize when loading: --precision q8)"
                )
            return write_directory(out, lambda tmp: _merged(model_dir, tmp, lora_scale))
        case _:
            raise ExportError(f"unknown export target {to!r}: choose one of {', '.join(TARGETS)}")


def _merged(model_dir: str | os.PathLike, out: Path, lora_scale: float | None) -> None:
    """The model directory with its weights whole: LoRA adapters merged (load_model merges them;
    times lora_scale when given), every other file as it was."""
    from ..model_dir import ADAPTER_FILE, ModelDir

    record = ModelDir.read(model_dir, lora_scale=1.0 if lora_scale is None else lora_scale)
    adapter = Path(model_dir) / ADAPTER_FILE
    if adapter.is_file():
        base = json.loads(adapter.read_text(encoding="utf-8")).get("base")
        scaled = "" if lora_scale is None else f" (their updates times {lora_scale:g})"
        note = f"LoRA adapters of {Path(model_dir).absolute()}{scaled} merged into {base}"
        record.readme = (record.readme or "") + f"\n{note}.\n"
    record.write(out)


def usage(to: str, written: Path) -> str:
    """How to run what export_model wrote: one line for the user (printed by `transformer
    export`)."""
    if to == "gguf":
        from .gguf import usage as gguf_usage

        return gguf_usage(written)
    if to == "dir":
        return f"a model directory: use it as any other (transformer info {written})"
    return f"see {written}/README.md for how to run it"
