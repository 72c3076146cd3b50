"""`transformer export`: a model directory out to CTranslate2, Hugging Face or GGUF (LoRA
adapters merged on the way out)."""

from __future__ import annotations

import argparse


def cmd_export(args: argparse.Namespace) -> None:
    """Write a model directory as a CTranslate2 (--to ct2) or Hugging Face (--to hf) model."""
    from ..export import export_model

    out = export_model(args.model_dir, args.to, args.out, quantization=args.quantization)
    print(f"wrote {out} ({args.to}): see {out}/README.md for how to run it")


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer export`."""
    p = sub.add_parser(
        "export", help="write a model directory as a CTranslate2 or Hugging Face model"
    )
    p.add_argument("model_dir")
    p.add_argument(
        "--to",
        required=True,
        choices=["ct2", "hf"],
        help="ct2: CTranslate2 (any encoder-decoder or decoder-only model we train); "
        "hf: Hugging Face transformers (Marian, GPT-2, Llama or BERT layouts)",
    )
    p.add_argument(
        "--out", required=True, help="the directory to write (must not exist, or be empty)"
    )
    p.add_argument(
        "--quantization",
        help="ct2 only: weights as int8, int8_float32, int16, float16, bfloat16, "
        "... (default float32)",
    )
    p.set_defaults(func=cmd_export)
