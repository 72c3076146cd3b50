"""`transformer import-hf`, `export` and `serve`: a model directory in from, or out to, other tools;
parsers beside handlers. serve's flags are derived from ServeConfig's settings."""

from __future__ import annotations

import argparse
import importlib.util
import os

from ..config import API_KEY_ENV, ServeConfig, settings_of
from .common import UserError, add_device_args, add_precision_arg, add_setting, setup_device


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


def add_import_hf_parser(sub: argparse._SubParsersAction) -> None:
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


def cmd_export(args: argparse.Namespace) -> None:
    """Write a model directory as a CTranslate2 (--to ct2) or Hugging Face (--to hf) model."""
    from ..export import export_model

    out = export_model(args.model_dir, args.to, args.out, quantization=args.quantization)
    print(f"wrote {out} ({args.to}): see {out}/README.md for how to run it")


def add_export_parser(sub: argparse._SubParsersAction) -> None:
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


def cmd_serve(args: argparse.Namespace) -> None:
    """Serve the model directory until SIGTERM / SIGINT (see transformer.serve)."""
    from ..model_dir import load_config

    if importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None:
        raise UserError("serve needs FastAPI and uvicorn: pip install 'transformer[serve]'")
    load_config(args.model_dir)  # a model directory, or the one error every command gives
    from ..serve import serve

    config = serve_config(args)
    status = serve(
        args.model_dir,
        config.host,
        config.port,
        config,
        device=setup_device(args),
        precision=args.precision,
        drain_timeout=config.drain_timeout,
    )
    if status:
        raise SystemExit(status)


def add_serve_parser(sub: argparse._SubParsersAction) -> None:
    """`transformer serve` (its flags derived from ServeConfig's settings)."""
    p = sub.add_parser(
        "serve",
        help="serve a model directory over HTTP (JSON API, streaming, a page with the attention)",
    )
    p.add_argument("model_dir")
    defaults = ServeConfig()
    first = ("host", "port")  # where it listens, then its limits
    for name in [*first, *(n for n in settings_of(ServeConfig) if n not in first)]:
        default = getattr(defaults, name)
        add_setting(
            p,
            ServeConfig,
            name,
            default=default,
            note=None if default is None else f"default {default}",
        )
    add_device_args(p)
    add_precision_arg(p)
    p.set_defaults(func=cmd_serve)


def serve_config(args: argparse.Namespace) -> ServeConfig:
    """ServeConfig from serve's flags; the API key from the environment when --api-key is not
    given."""
    values = {name: getattr(args, name) for name in settings_of(ServeConfig)}
    values["api_key"] = args.api_key or os.environ.get(API_KEY_ENV) or None
    return ServeConfig(**values)


def register(sub: argparse._SubParsersAction) -> None:
    """`import-hf`, `export` and `serve`."""
    add_import_hf_parser(sub)
    add_export_parser(sub)
    add_serve_parser(sub)
