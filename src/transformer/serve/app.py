"""`transformer serve`: a model directory behind an HTTP API, and a page that shows the attention.

One process, the model loaded once and owned by one worker thread (worker.py; continuous batching:
scheduler.py); the event loop only parses, validates, queues and answers, so /health and /metrics
answer while a batch decodes.

Endpoints (routes.py; JSON in and out, bodies in schemas.py; errors are {"error": {"code",
"message"}}: errors.py; the rules they share: state.py):
  POST /v1/translate   encoder-decoder models; lines batched with other requests' (scheduler.py)
  POST /v1/generate    decoder-only models; "stream": true sends Server-Sent Events (streaming.py)
  POST /v1/attention   the weights `transformer attention` draws, for the page
  POST /v1/classify    classifiers: texts ("text") or base64 image files ("images") -> top_k labels
  POST /v1/transcribe  speech models: base64 WAV files ("audio") -> transcripts
  POST /v1/detect      detectors: base64 image files ("images") -> objects, boxes (detection.py)
  GET  /health         200 once the model is loaded (503 before)
  GET  /v1/model       family, sizes, vocabulary, decoding defaults
  GET  /v1/models, POST /v1/completions, POST /v1/chat/completions
                       OpenAI's API for decoder-only models, errors in OpenAI's shape (openai.py)
  POST /translate, GET /languages
                       LibreTranslate's API for translation models, errors in its shape
                       (libretranslate.py)
  POST a task's own    the routes of the table of tasks that answer themselves (task_routes.py)
  GET  /metrics        Prometheus text format, per endpoint (routes.ROUTES and the tasks' own;
                       "other" for the rest)
  GET  /               the page (static HTML/JS shipped in the package; no network fetch)
  GET  /docs           the API's Swagger UI page, its files served from here (docs.py: offline)

With an API key every endpoint but /health, the page and the OpenAPI page needs
`Authorization: Bearer KEY` (the page asks for the key when a call is refused); LibreTranslate's
/translate checks its own (the `api_key` field, or that header) and its /languages needs none.
"""

from __future__ import annotations

import asyncio
import hmac
import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..config import API_KEY_ENV, ServeConfig
from ..decoding.pipeline import Pipeline
from .detection import router as detection_router
from .docs import ASSETS, install_docs
from .errors import LIBRETRANSLATE_PATHS, error_response, install_error_handlers
from .libretranslate import router as libretranslate_router
from .openai import router as openai_router
from .routes import ROUTES, router
from .state import State
from .task_routes import task_paths, task_router

__all__ = ["API_KEY_ENV", "ROUTES", "ServeConfig", "State", "create_app"]

OPEN_PATHS = {"/health", "/", "/docs", "/openapi.json"}
"""Paths that need no API key: for load balancers, the page (it asks for the key) and the API
docs (with their files, under docs.ASSETS)."""


def create_app(
    model: str | Pipeline | None,
    config: ServeConfig | None = None,
    device: str = "cpu",
    precision: str | None = None,
    model_name: str | None = None,
) -> FastAPI:
    """The FastAPI app for a model directory (loaded on a thread when the app starts; /health says
    when it is ready) or a Pipeline. With None the caller loads it and calls
    app.state.serve.start. model_name: the model's id in OpenAI's API (default: the directory's
    name; "model" for a Pipeline)."""
    config = config or ServeConfig()
    state = State(config)

    def load() -> None:
        try:
            state.start(
                model
                if isinstance(model, Pipeline)
                else Pipeline.load(model, device, precision=precision)
            )
        except Exception as e:  # noqa: BLE001 - reported by /health and every endpoint
            state.load_error = f"{type(e).__name__}: {e}"

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if isinstance(model, Pipeline):
            load()
        elif model is not None:
            threading.Thread(target=load, name="transformer-serve-load", daemon=True).start()
        yield
        if state.worker is not None:
            state.worker.stop(timeout=config.timeout)

    app = FastAPI(
        title="transformer serve",
        lifespan=lifespan,
        docs_url=None,  # docs.py serves /docs with its own files, not a CDN's
        redoc_url=None,
        description="A `transformer` model directory behind an HTTP API.",
    )
    app.state.serve = state
    app.state.model_name = model_name or (
        "model" if model is None or isinstance(model, Pipeline) else Path(model).resolve().name
    )
    app.state.started = int(time.time())
    if config.cors_origin:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=[config.cors_origin],
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type"],
        )
    app.add_middleware(BodyGuard, config=config)
    app.middleware("http")(_guard)
    install_error_handlers(app)
    app.include_router(router)
    app.include_router(detection_router)
    install_docs(app)
    app.include_router(openai_router)
    app.include_router(libretranslate_router)
    app.include_router(task_router())
    app.state.routes = ROUTES | task_paths()
    return app


async def _guard(request: Request, call_next):
    """Metrics, the API key and the body size limit, before any endpoint runs."""
    state: State = request.app.state.serve
    config = state.config
    start = time.monotonic()
    path = request.url.path
    open_path = (
        path in OPEN_PATHS
        or path in LIBRETRANSLATE_PATHS  # the key is a field there: libretranslate.py checks it
        or path.startswith(f"{ASSETS}/")
    )
    if config.api_key and not open_path and request.method != "OPTIONS":
        given = request.headers.get("authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {config.api_key}".encode()):
            response = error_response(
                401,
                "unauthorized",
                "this server needs an API key: send the header 'Authorization: Bearer KEY'",
                {"WWW-Authenticate": "Bearer"},
                path,
            )
            state.metrics.request(path, 401, time.monotonic() - start)
            return response
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > config.max_body_bytes:
        response = error_response(
            413,
            "body_too_large",
            f"the request body has {int(length):,} bytes, more "
            f"than this server takes ({config.max_body_bytes:,}; see --max-body-bytes)",
            None,
            path,
        )
    else:
        response = await call_next(request)
    endpoint = path if path in request.app.state.routes else "other"
    state.metrics.request(endpoint, response.status_code, time.monotonic() - start)
    return response


class BodyGuard:
    """The request body's two limits, checked as it arrives (ASGI middleware around `receive`): past
    max_body_bytes, with a Content-Length or chunked, 413 before the rest is read (_guard refuses a
    too large Content-Length before reading anything); not all arrived within the timeout (a client
    that trickles it or stops sending), 408. Either answer closes the connection."""

    def __init__(self, app, config: ServeConfig):
        self.app, self.config = app, config

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        config = self.config
        deadline = time.monotonic() + config.timeout
        size, done, refused = 0, False, False

        async def guarded_receive():
            nonlocal size, done, refused
            if done:  # the body is in: what follows is the disconnect, whenever it comes
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                refused = True
                raise StarletteHTTPException(
                    408,
                    f"the request body did not arrive within {config.timeout:g} s "
                    "(see --timeout): send it whole, at once",
                ) from None
            size += len(message.get("body", b""))
            done = not message.get("more_body", False)
            if size > config.max_body_bytes:
                refused = True
                raise StarletteHTTPException(
                    413,
                    f"the request body has more than {config.max_body_bytes:,} bytes, more than "
                    "this server takes (see --max-body-bytes)",
                )
            return message

        async def closing_send(message):
            if refused and message["type"] == "http.response.start":
                message = {**message, "headers": [*message["headers"], (b"connection", b"close")]}
            await send(message)

        await self.app(scope, guarded_receive, closing_send)
