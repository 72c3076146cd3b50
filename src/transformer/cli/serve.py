"""`transformer serve`: the JSON API, the OpenAI and LibreTranslate APIs and the page over a model
directory. Its flags are derived from ServeConfig's settings."""

from __future__ import annotations

import argparse
import importlib.util
import os

from ..config import (
    API_KEY_ENV,
    ServeConfig,
    settings_of,
)
from .common import (
    UserError,
    add_device_args,
    add_precision_arg,
    add_setting,
    setup_device,
)


def cmd_serve(args: argparse.Namespace) -> None:
    """Serve the model directory until SIGTERM / SIGINT (see transformer.serve)."""
    from ..model.io import load_config

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


def register(sub: argparse._SubParsersAction) -> None:
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
