"""`transformer import-hf`: a Hugging Face directory, a GGUF file or a CTranslate2 Whisper as a
model directory. The handler is `import_hf`; its parser is derived from its signature (cli.args)."""

from __future__ import annotations

import argparse
from typing import Annotated

from .args import Arg, command


def import_hf(
    path: Annotated[
        str,
        Arg(
            "a Hugging Face model directory (config.json + weights), a .gguf file, or a "
            "CTranslate2 Whisper directory (model.bin + tokenizer.json)",
            positional=True,
        ),
    ],
    out: Annotated[str, Arg("the model directory to write", metavar="MODEL_DIR")],
) -> None:
    """Convert a Hugging Face model directory, a .gguf file or a CTranslate2 Whisper directory into
    a model directory."""
    from ..interop.ct2 import import_ct2, is_ct2_directory
    from ..interop.hf.importing import import_hf as convert_hf
    from ..model.accounting import count_parameters

    convert = import_ct2 if is_ct2_directory(path) else convert_hf
    result = convert(path, out)
    total = count_parameters(result.model)
    print(f"imported {result.model_type} model ({total / 1e6:.2f}M parameters) from {path}")
    print(f"wrote {out}: {', '.join(result.files)}")


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer import-hf`."""
    command(
        sub,
        "import-hf",
        import_hf,
        help="convert a Hugging Face model (directory or .gguf file) or a CTranslate2 Whisper "
        "directory into a model directory",
    )
