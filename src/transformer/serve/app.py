"""`transformer serve`: a model directory behind an HTTP API, and a page that shows the attention.

One process, the model loaded once and owned by one worker thread (worker.py); the event loop
only parses, validates, queues and answers, so /health and /metrics answer while a batch decodes.

Endpoints (JSON in and out; errors are {"error": {"code", "message"}}: errors.py; bodies: schemas.py):
  POST /v1/translate   encoder-decoder models; lines batched with other requests' (worker.py)
  POST /v1/generate    decoder-only models; "stream": true sends Server-Sent Events (streaming.py)
  POST /v1/attention   the weights `transformer attention` draws, for the page
  POST /v1/classify    classifiers: texts ("text") or base64 image files ("images") -> top_k labels each
  GET  /health         200 once the model is loaded (503 before)
  GET  /v1/model       family, sizes, vocabulary, decoding defaults
  GET  /metrics        Prometheus text format, per endpoint (ROUTES: every route below; "other" else)
  GET  /               the page (static HTML/JS shipped in the package; no network fetch)
  GET  /docs           FastAPI's OpenAPI page

With an API key every endpoint but /health, the page and the OpenAPI page needs
`Authorization: Bearer KEY` (the page asks for the key when a call is refused).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import io
import threading
import time
from contextlib import asynccontextmanager
from dataclasses import asdict
from importlib import resources

import torch
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, StreamingResponse

from ..config import API_KEY_ENV, ServeConfig
from ..decoding.pipeline import Pipeline, PipelineError
from .errors import ApiError, error_response, install_error_handlers
from .metrics import Metrics
from .schemas import (
    AttentionRequest,
    AttentionResponse,
    ClassifyRequest,
    ClassifyResponse,
    GenerateRequest,
    GenerateResponse,
    TranslateRequest,
    TranslateResponse,
)
from .streaming import disconnected, stream
from .worker import Cancelled, Job, QueueFull, Worker

__all__ = ["API_KEY_ENV", "ROUTES", "ServeConfig", "State", "create_app"]

OPEN_PATHS = {"/health", "/", "/docs", "/openapi.json", "/docs/oauth2-redirect", "/redoc"}
router = APIRouter()


class State:
    """The loaded pipeline (None while loading), the worker and the metrics."""

    def __init__(self, config: ServeConfig):
        self.config = config
        self.pipeline: Pipeline | None = None
        self.load_error: str | None = None
        self.worker: Worker | None = None
        self.metrics = Metrics()

    def start(self, pipeline: Pipeline, own_thread: bool = True) -> Worker:
        """Serve `pipeline`: its worker runs on a thread of its own, or (own_thread=False) on the
        thread that then calls worker.run() (`transformer serve`: the main thread)."""
        cfg = self.config
        self.worker = Worker(self._translate, cfg.max_batch_tokens, cfg.max_wait_ms, cfg.max_queue,
                             on_batch=lambda stats: self.metrics.batch(stats.lines))
        if own_thread:
            self.worker.start()
        self.pipeline = pipeline
        return self.worker

    def _translate(self, lines: list[str], settings: dict):
        cut: list[int] = []
        outputs = self.pipeline.translate(lines, batch_tokens=self.config.max_batch_tokens,
                                          on_truncate=cut.extend, **settings)
        return outputs, cut

    @property
    def family(self) -> str:
        return self.pipeline.model.config.arch

    def ready(self) -> Pipeline:
        """The pipeline, or 503 while it loads (or when it failed to)."""
        if self.pipeline is None:
            if self.load_error:
                raise ApiError(503, "model_failed", f"the model could not be loaded: {self.load_error}")
            raise ApiError(503, "loading", "the model is still loading: retry in a moment", {"Retry-After": "1"})
        return self.pipeline

    def serving(self, needed: str, endpoint: str) -> Pipeline:
        """The pipeline when its model is of family `needed`, else 400 naming the right endpoint."""
        pipeline = self.ready()
        arch = self.family
        if arch != needed:
            other = {"encoder-decoder": "/v1/translate", "decoder": "/v1/generate"}.get(arch)
            if arch == "encoder" and pipeline.model.config.n_classes:
                other = "/v1/classify"
            hint = f"; use {other}" if other else "; it serves /v1/model only"
            raise ApiError(400, "wrong_endpoint", f"{endpoint} needs a {needed} model and this one is {arch}{hint}")
        return pipeline

    def queue(self, job: Job) -> None:
        try:
            self.worker.submit(job)
        except QueueFull as e:
            raise ApiError(503, "overloaded", f"{e}: retry later", {"Retry-After": "1"}) from None

    async def submit(self, job: Job, request: Request):
        """Queue the job and wait for it: 503 when the queue is full, 504 past the timeout; a
        client that goes away cancels it."""
        self.queue(job)
        future = asyncio.wrap_future(job.future)
        gone = asyncio.ensure_future(disconnected(request))
        timeout = self.config.timeout
        try:
            done, _ = await asyncio.wait({future, gone}, timeout=max(0.0, job.arrived + timeout - time.monotonic()),
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if future not in done:
            job.stop.set()
            future.cancel()
            if gone in done:
                raise ApiError(499, "client_closed", "the client went away")
            raise ApiError(504, "timeout", f"the request took more than {timeout:g} s (see --timeout)")
        try:
            return future.result()
        except PipelineError as e:
            raise ApiError(422, "invalid_request", str(e)) from None


def create_app(model: str | Pipeline | None, config: ServeConfig | None = None, device: str = "cpu",
               precision: str | None = None) -> FastAPI:
    """The FastAPI app for a model directory (loaded on a thread when the app starts; /health says
    when it is ready) or a Pipeline. With None the caller loads it and calls app.state.serve.start."""
    config = config or ServeConfig()
    state = State(config)

    def load() -> None:
        try:
            state.start(model if isinstance(model, Pipeline) else Pipeline.load(model, device, precision=precision))
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

    app = FastAPI(title="transformer serve", lifespan=lifespan,
                  description="A `transformer` model directory behind an HTTP API.")
    app.state.serve = state
    if config.cors_origin:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=[config.cors_origin], allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type"])
    app.middleware("http")(_guard)
    install_error_handlers(app)
    app.include_router(router)
    return app


async def _guard(request: Request, call_next):
    """Metrics, the API key and the body size limit, before any endpoint runs."""
    state: State = request.app.state.serve
    config = state.config
    start = time.monotonic()
    path = request.url.path
    if config.api_key and path not in OPEN_PATHS and request.method != "OPTIONS":
        given = request.headers.get("authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {config.api_key}".encode()):
            response = error_response(401, "unauthorized", "this server needs an API key: send the header "
                                      "'Authorization: Bearer KEY'", {"WWW-Authenticate": "Bearer"})
            state.metrics.request(path, 401, time.monotonic() - start)
            return response
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > config.max_body_bytes:
        response = error_response(413, "body_too_large", f"the request body has {int(length):,} bytes, more "
                                  f"than this server takes ({config.max_body_bytes:,}; see --max-body-bytes)")
    else:
        response = await call_next(request)
    endpoint = path if path in ROUTES else "other"
    state.metrics.request(endpoint, response.status_code, time.monotonic() - start)
    return response


def _state(request: Request) -> State:
    return request.app.state.serve


@router.get("/health")
async def health(request: Request):
    state = _state(request)
    if state.pipeline is None:
        status = "failed" if state.load_error else "loading"
        return JSONResponse({"status": status, "error": state.load_error}, status_code=503)
    return {"status": "ok"}


@router.get("/v1/model")
async def model_info(request: Request):
    state = _state(request)
    pipeline, config = state.ready(), state.config
    m = pipeline.model
    cfg = m.config
    endpoints = {"encoder-decoder": ["/v1/translate", "/v1/attention"], "decoder": ["/v1/generate", "/v1/attention"]}
    return {
        "family": cfg.arch,
        "endpoints": endpoints.get(cfg.arch, ["/v1/classify"] if cfg.n_classes else []),
        "parameters": sum(p.numel() for p in m.parameters()),
        "vocabulary": {"source": cfg.vocab_size, "target": cfg.target_vocab_size},
        "config": asdict(cfg),
        "decoding": asdict(pipeline.decode),
        "precision": pipeline.precision.precision,
        "chat": pipeline.chat is not None,
        "limits": {"max_lines": config.max_lines, "max_body_bytes": config.max_body_bytes,
                   "max_batch_tokens": config.max_batch_tokens, "timeout": config.timeout},
    }


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(request: Request):
    state = _state(request)
    worker = state.worker
    text = state.metrics.render(worker.depth if worker else 0, bool(worker and worker.busy))
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4")


@router.post("/v1/translate", response_model=TranslateResponse)
async def translate(body: TranslateRequest, request: Request):
    state = _state(request)
    pipeline, max_lines = state.serving("encoder-decoder", "/v1/translate"), state.config.max_lines
    lines = [body.text] if isinstance(body.text, str) else body.text
    if len(lines) > max_lines:
        raise ApiError(413, "too_many_lines", f"the request has {len(lines)} lines, more than this server takes "
                       f"in one request ({max_lines}; see --max-lines): send them in several requests")
    bad = [i for i, line in enumerate(lines) if "\n" in line or "\r" in line]
    if bad:
        raise ApiError(422, "invalid_request", f"text[{bad[0]}] holds a line break: send one line per list item")
    settings = {k: v for k, v in body.model_dump(exclude={"text"}).items() if v is not None}
    try:
        s = pipeline.settings(**settings)
    except (PipelineError, ValueError) as e:
        raise ApiError(422, "invalid_request", str(e)) from None
    if s.n_best > s.beam_size:
        raise ApiError(422, "invalid_request", f"n_best {s.n_best} is more than beam_size {s.beam_size}: a beam "
                       "returns at most as many hypotheses as it keeps")
    tokens = sum(len(ids) for ids in pipeline.source_tokenizer.encode_batch(lines))
    job = Job("translate", lines=lines, key=tuple(sorted(settings.items())), tokens=tokens)
    outputs, cut = await state.submit(job, request)
    state.metrics.translated(len(lines))
    return {"translations": outputs, "truncated": cut}


@router.post("/v1/generate", response_model=GenerateResponse,
             responses={200: {"content": {"text/event-stream": {}}, "description": "JSON, or SSE with stream"}})
async def generate(body: GenerateRequest, request: Request):
    state = _state(request)
    pipeline = state.serving("decoder", "/v1/generate")
    if body.chat and pipeline.chat is None:
        raise ApiError(422, "invalid_request", "chat: this model has no chat template")
    decode = {k: v for k, v in body.model_dump(include={"max_new_tokens", "temperature", "top_k", "top_p"}).items()
              if v is not None}
    try:
        s = pipeline.settings(**decode)  # temperature 0 is greedy: decoding.sampling's rule
    except (PipelineError, ValueError) as e:
        raise ApiError(422, "invalid_request", str(e)) from None
    full = pipeline.prompt_ids(body.prompt, body.chat)
    prompt_tokens = len(pipeline.fit_prompt(full, s.max_new_tokens))
    ids: list[int] = []
    loop = asyncio.get_running_loop()
    events: asyncio.Queue | None = asyncio.Queue() if body.stream else None
    job = Job("generate")

    def on_token(token: int) -> None:
        if job.stop.is_set():
            raise Cancelled
        ids.append(token)
        if events is not None:
            loop.call_soon_threadsafe(events.put_nowait, token)

    job.run = lambda: pipeline.generate(body.prompt, chat=body.chat, seed=body.seed, on_token=on_token,
                                        on_truncate=lambda message: None, **decode)

    def final(text: str) -> dict:
        state.metrics.generated(len(ids))
        return {"text": text, "prompt_tokens": prompt_tokens, "completion_tokens": len(ids),
                "truncated": prompt_tokens < len(full)}

    if not body.stream:
        return final(await state.submit(job, request))
    state.queue(job)
    return StreamingResponse(stream(job, events, pipeline, final, state.config.timeout),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


@router.post("/v1/attention", response_model=AttentionResponse)
async def attention(body: AttentionRequest, request: Request):
    state = _state(request)
    pipeline = state.ready()
    if state.family not in ("encoder-decoder", "decoder"):
        raise ApiError(400, "wrong_endpoint", f"/v1/attention needs a model that generates text; this one is "
                       f"{state.family}")
    if state.family == "decoder" and body.kind not in (None, "self"):
        raise ApiError(400, "wrong_endpoint", f"kind={body.kind!r}: a language model has only decoder "
                       "self-attention; use kind 'self'")
    from ..viz.attention import attention_map

    def run():
        return attention_map(pipeline, body.text, layer=body.layer, kind=body.kind, head="all",
                             beam_size=body.beam_size)

    m = await state.submit(Job("attention", run=run), request)
    return {"kind": m.kind, "layer": m.layer, "n_layers": m.n_layers, "n_heads": m.n_heads, "source": m.source,
            "output": m.output, "output_text": m.output_text, "rows": m.rows, "columns": m.columns,
            "weights": [[[round(float(w), 5) for w in row] for row in head] for head in m.weights.tolist()]}


@router.post("/v1/classify", response_model=ClassifyResponse)
async def classify(body: ClassifyRequest, request: Request):
    state = _state(request)
    pipeline = state.ready()
    cfg = pipeline.model.config
    if state.family != "encoder" or not cfg.n_classes:
        hint = {"encoder-decoder": "; use /v1/translate", "decoder": "; use /v1/generate"}.get(state.family, "")
        what = "an encoder without classes" if state.family == "encoder" else state.family
        raise ApiError(400, "wrong_endpoint", f"/v1/classify needs a classifier (an encoder with classes); "
                       f"this one is {what}{hint}")
    want, other = ("images", "text") if cfg.vision is not None else ("text", "images")
    given = body.images if want == "images" else body.text
    if given is None or getattr(body, other) is not None:
        raise ApiError(422, "invalid_request", f"this is {'an image' if want == 'images' else 'a text'} classifier: "
                       f"send {want!r}" + (f", not {other!r}" if getattr(body, other) is not None else ""))
    inputs = [given] if isinstance(given, str) else given
    max_lines = state.config.max_lines
    if len(inputs) > max_lines:
        raise ApiError(413, "too_many_lines", f"the request has {len(inputs)} inputs, more than this server takes "
                       f"in one request ({max_lines}; see --max-lines): send them in several requests")
    cut: list[int] = []
    if want == "images":
        batch = decode_images(inputs, cfg.vision)
        run = lambda: pipeline.classify_images(batch, top_k=body.top_k)  # noqa: E731
    else:
        empty = [i for i, text in enumerate(inputs) if not text.strip()]
        if empty:
            raise ApiError(422, "invalid_request", f"text[{empty[0]}] is empty: send some text to classify")
        run = lambda: pipeline.classify(inputs, top_k=body.top_k, on_truncate=cut.extend)  # noqa: E731
    results = await state.submit(Job("classify", run=run), request)
    return {"labels": [[{"label": label, "probability": round(float(p), 6)} for label, p in r] for r in results],
            "truncated": [n - 1 for n in cut]}


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def page():
    return HTMLResponse(resources.files(__package__).joinpath("static/index.html").read_text(encoding="utf-8"))


ROUTES = frozenset(route.path for route in router.routes)
"""The paths /metrics counts by name (every route above, so none is left out); others count as "other"."""


def decode_images(items: list[str], vision) -> torch.Tensor:
    """Base64 image files -> uint8 (N, C, H, W); a bad one is a 422 naming its index."""
    from ..data.images import ImageError, read_image

    mode = "L" if vision.channels == 1 else "RGB"
    images = []
    for i, item in enumerate(items):
        try:
            raw = base64.b64decode(item, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(422, "invalid_request", f"images[{i}] is not base64: send each image file "
                           "base64-encoded") from None
        try:
            images.append(torch.from_numpy(read_image(io.BytesIO(raw), mode, vision.image_size, name=f"images[{i}]")))
        except ImageError as e:
            raise ApiError(422, "invalid_request", str(e)) from None
    return torch.stack(images)
