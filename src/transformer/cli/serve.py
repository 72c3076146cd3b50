"""`transformer serve`: the JSON API, the OpenAI and LibreTranslate APIs and the page over a model
directory. The handler is `serve`; its parser is derived from its signature (cli.args), and the
server's flags from ServeConfig's settings (each defined once, in config/serve.py)."""

from __future__ import annotations

import argparse
import importlib.util
import os
from typing import Annotated

from ..config import API_KEY_ENV, ServeConfig, settings_of
from .args import Settings, command
from .common import ModelRun, UserError

FIRST = ("host", "port")
"""Where the server listens comes first in --help, then its limits."""
ORDER = (*FIRST, *(name for name in settings_of(ServeConfig) if name not in FIRST))
NOTES = {
    name: f"default {value}"
    for name in ORDER
    if (value := getattr(ServeConfig(), name)) is not None
}
"""Each setting's help ends with the server's default (a flag left out keeps it)."""


def serve(
    run: ModelRun,
    settings: Annotated[dict, Settings(ServeConfig, ORDER, note=None, notes=NOTES)] = None,
) -> None:
    """Serve the model directory until SIGTERM / SIGINT (see transformer.serve)."""
    from ..model_dir import load_config

    if importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None:
        raise UserError("serve needs FastAPI and uvicorn: pip install 'transformer[serve]'")
    load_config(run.model_dir)  # a model directory, or the one error every command gives
    from ..decoding.pipeline import pick_device
    from ..serve import serve as run_server

    config = serve_config(settings or {})
    status = run_server(
        run.model_dir,
        config.host,
        config.port,
        config,
        device=pick_device(run.device, run.threads),
        precision=run.precision,
        drain_timeout=config.drain_timeout,
    )
    if status:
        raise SystemExit(status)


def serve_config(given: dict) -> ServeConfig:
    """ServeConfig from the settings given on the command line (the others keep their defaults);
    the API key from the environment when --api-key is not given."""
    values = dict(given)
    values["api_key"] = values.get("api_key") or os.environ.get(API_KEY_ENV) or None
    return ServeConfig(**values)


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer serve`."""
    command(
        sub,
        "serve",
        serve,
        help="serve a model directory over HTTP (JSON API, streaming, a page with the attention)",
    )
