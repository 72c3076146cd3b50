"""`transformer import-hf`: a Hugging Face directory, a GGUF file or a CTranslate2 Whisper as a
model directory."""

from __future__ import annotations

import argparse


def cmd_import_hf(args: argparse.Namespace) -> None:
    """Convert a Hugging Face model directory, a .gguf file or a CTranslate2 Whisper directory into
    a model directory."""
    from ..interop.ct2 import import_ct2, is_ct2_directory
    from ..interop.hf import import_hf
    from ..model.accounting import count_parameters

    convert = import_ct2 if is_ct2_directory(args.path) else import_hf
    result = convert(args.path, args.out)
    total = count_parameters(result.model)
    print(f"imported {result.model_type} model ({total / 1e6:.2f}M parameters) from {args.path}")
    print(f"wrote {args.out}: {', '.join(result.files)}")


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer import-hf`."""
    p = sub.add_parser(
        "import-hf",
        help="convert a Hugging Face model (directory or .gguf file) or a CTranslate2 Whisper "
        "directory into a model directory",
    )
    p.add_argument(
        "path",
        help="a Hugging Face model directory (config.json + weights), a .gguf file, or a "
        "CTranslate2 Whisper directory (model.bin + tokenizer.json)",
    )
    p.add_argument("--out", required=True, metavar="MODEL_DIR", help="the model directory to write")
    p.set_defaults(func=cmd_import_hf)
