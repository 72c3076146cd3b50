"""`transformer serve`: a model directory behind an HTTP API, with continuous batching and a page
that shows the attention. Needs the [serve] extra (FastAPI + uvicorn). See app.py for the
endpoints, schemas.py for the request bodies (derived from the settings in transformer.config),
errors.py, streaming.py, openai.py (OpenAI's API), libretranslate.py (LibreTranslate's),
detection.py (/v1/detect), uploads.py (files sent as base64), and scheduler.py for the batching
(worker.py: the thread and its queue). ServeConfig (its settings) lives in
transformer.config.serve."""

from __future__ import annotations

import ipaddress
import os
import sys

from ..config import API_KEY_ENV, ServeConfig
from .app import create_app

__all__ = ["API_KEY_ENV", "ServeConfig", "create_app", "is_loopback", "serve"]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(
    model_dir: str,
    host: str = ServeConfig.host,
    port: int = ServeConfig.port,
    config: ServeConfig | None = None,
    device: str = "cpu",
    precision: str | None = None,
    drain_timeout: float = ServeConfig.drain_timeout,
    log_level: str = "info",
) -> int:
    """Run the server until SIGTERM / SIGINT: then stop accepting, let requests in flight finish
    (at most drain_timeout seconds), stop the worker and return 0 (1 if it could not start).

    The HTTP side (uvicorn's event loop) runs on a thread; the model is loaded and run on the
    calling (main) thread, where torch's thread pool is fastest (Worker.run), and where signals
    arrive: a first one asks uvicorn to drain and stop, a second one to stop at once."""
    import signal
    import threading

    import uvicorn

    from ..decoding.pipeline import Pipeline

    config = config or ServeConfig()
    if not is_loopback(host) and not config.api_key:
        print(
            f"transformer serve: warning: listening on {host}, reachable from other machines, "
            f"without an API key: anyone who can reach it can use it; set {API_KEY_ENV} (or "
            "--api-key)",
            file=sys.stderr,
        )
    app = create_app(None, config, model_name=os.path.basename(os.path.abspath(model_dir)))
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level=log_level,
            log_config=_log_config(log_level),
            timeout_graceful_shutdown=drain_timeout,
            server_header=False,
            access_log=os.environ.get("TRANSFORMER_ACCESS_LOG", "1") != "0",
        )
    )
    http = threading.Thread(target=server.run, name="transformer-serve-http", daemon=True)

    def on_signal(sig, frame):
        if server.should_exit:
            server.force_exit = True
        server.should_exit = True

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    state = app.state.serve
    try:
        http.start()
        try:
            pipeline = Pipeline.load(model_dir, device, precision=precision)
        except Exception as e:  # noqa: BLE001 - said on stderr, and the server stops
            state.load_error = f"{type(e).__name__}: {e}"
            print(
                f"transformer serve: error: {model_dir} could not be loaded: {e}", file=sys.stderr
            )
            server.should_exit = True
            http.join()
            return 1
        if server.should_exit or not http.is_alive():
            http.join()
            return 0 if server.started else _cannot_listen(host, port)
        state.start(pipeline, own_thread=False).run(alive=http.is_alive)
        http.join()
        return 0 if server.started else _cannot_listen(host, port)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _log_config(level: str) -> dict:
    """uvicorn's logging, and the server's own lines (logger "transformer.serve": a request
    cancelled, ...) printed the same way."""
    from uvicorn.config import LOGGING_CONFIG

    ours = {"handlers": ["default"], "level": level.upper(), "propagate": False}
    return {**LOGGING_CONFIG, "loggers": {**LOGGING_CONFIG["loggers"], "transformer.serve": ours}}


def _cannot_listen(host: str, port: int) -> int:
    print(
        f"transformer serve: error: could not listen on {host}:{port} (see uvicorn's message "
        "above): give another --port, or stop what uses it",
        file=sys.stderr,
    )
    return 1
