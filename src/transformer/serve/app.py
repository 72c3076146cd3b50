"""`transformer serve`: a model directory behind an HTTP API, and a page that shows the attention.

One process, the model loaded once and owned by one worker thread (worker.py); the event loop
only parses, validates, queues and answers, so /health and /metrics answer while a batch decodes.

Endpoints (JSON in and out; errors are {"error": {"code", "message"}}):
  POST /v1/translate   encoder-decoder models; lines batched with other requests' (worker.py)
  POST /v1/generate    decoder-only models; "stream": true sends Server-Sent Events
  POST /v1/attention   the weights `transformer attention` draws, for the page
  POST /v1/classify    classifiers: texts ("text") or base64 image files ("images") -> top_k labels each
  GET  /health         200 once the model is loaded (503 before)
  GET  /v1/model       family, sizes, vocabulary, decoding defaults
  GET  /metrics        Prometheus text format
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
import json
import threading
import time
from contextlib import asynccontextmanager
from dataclasses import asdict
from importlib import resources
from typing import Literal

import torch
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..config import API_KEY_ENV, ServeConfig
from ..decoding.pipeline import Pipeline, PipelineError
from .metrics import Metrics
from .worker import Cancelled, Job, QueueFull, Worker

ROUTES = {"/health", "/v1/model", "/metrics", "/v1/translate", "/v1/generate", "/v1/attention", "/"}
OPEN_PATHS = {"/health", "/", "/docs", "/openapi.json", "/docs/oauth2-redirect", "/redoc"}


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers


def error_response(status: int, code: str, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=headers)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TranslateRequest(Strict):
    text: str | list[str] = Field(description="One line, or a list of lines (each translated on its own).")
    beam_size: int | None = Field(None, ge=1, le=64, description="1 = greedy; default from decode.json")
    length_penalty: float | None = Field(None, ge=0, le=10, description="alpha")
    length_penalty_kind: Literal["wu", "power"] | None = Field(
        None, description="wu: ((5+|Y|)/6)^alpha (the paper's); power: |Y|^alpha")
    n_best: int | None = Field(None, ge=1, le=64, description="hypotheses per line (at most beam_size)")
    max_len_a: float | None = Field(None, ge=0, le=10, description="output length bound a*source_length + b")
    max_len_b: int | None = Field(None, ge=0, le=4096)


class TranslateResponse(BaseModel):
    translations: list[str] | list[list[str]] = Field(
        description="One per input line, in order; with n_best > 1 a list of the n best per line.")
    truncated: list[int] = Field(description="Indices (from 0) of the lines cut to the model's max_positions.")


class GenerateRequest(Strict):
    prompt: str
    chat: bool = Field(False, description="apply the model's chat template to the prompt as a user message")
    max_new_tokens: int | None = Field(None, ge=1, le=4096)
    temperature: float | None = Field(None, ge=0, le=10, description="0 = greedy")
    top_k: int | None = Field(None, ge=0, description="0 = no limit")
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = Field(None, ge=0, le=2**63 - 1, description="for reproducible sampling")
    stream: bool = Field(False, description="Server-Sent Events: one per new piece of text, then a final 'done'")


class GenerateResponse(BaseModel):
    text: str
    prompt_tokens: int
    completion_tokens: int
    truncated: bool = Field(description="whether the prompt was cut (its end kept) to fit max_new_tokens")


class AttentionRequest(Strict):
    text: str = Field(min_length=1)
    layer: int = Field(-1, description="from 0; -1 = the last")
    kind: Literal["cross", "self", "encoder"] | None = Field(
        None, description="cross (default for translation), self (decoder), encoder")
    beam_size: int | None = Field(None, ge=1, le=64)


class AttentionResponse(BaseModel):
    kind: str
    layer: int
    n_layers: int
    n_heads: int
    source: list[str]
    output: list[str]
    output_text: str
    rows: list[str] = Field(description="the query of each row: the output token it predicted")
    columns: list[str] = Field(description="the keys: source tokens (cross, encoder) or decoder inputs (self)")
    weights: list[list[list[float]]] = Field(description="(heads, rows, columns)")


class ClassifyRequest(Strict):
    text: str | list[str] | None = Field(None, description="a text classifier's input: one text or a list of texts")
    images: list[str] | None = Field(None, description="an image classifier's input: base64-encoded image files "
                                                       "(PNG, JPEG, ...) of the model's size")
    top_k: int = Field(1, ge=0, le=10000, description="labels per input, the most probable first (0 = all)")


class LabelScore(BaseModel):
    label: str
    probability: float


class ClassifyResponse(BaseModel):
    labels: list[list[LabelScore]] = Field(description="per input, in order: its top_k labels")
    truncated: list[int] = Field(description="Indices (from 0) of the texts cut to the model's max_positions.")


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

    @app.middleware("http")
    async def guard(request: Request, call_next):
        """Metrics, the API key and the body size limit, before any endpoint runs."""
        start = time.monotonic()
        path = request.url.path
        if config.api_key and path not in OPEN_PATHS and request.method != "OPTIONS":
            given = request.headers.get("authorization", "")
            expected = f"Bearer {config.api_key}"
            if not hmac.compare_digest(given.encode(), expected.encode()):
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

    @app.exception_handler(ApiError)
    async def api_error(request: Request, e: ApiError):
        return error_response(e.status, e.code, e.message, e.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, e: RequestValidationError):
        problems = []
        for err in e.errors():
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
            if err.get("type") == "json_invalid":
                problems.append(f"the body is not valid JSON ({err.get('ctx', {}).get('error', err['msg'])})")
            elif where == "body" and err.get("type") in ("model_attributes_type", "dict_type", "missing"):
                problems.append("the body must be a JSON object (with the header 'Content-Type: application/json')")
            elif err.get("type") == "extra_forbidden":
                problems.append(f"{where}: unknown field")
            else:
                problems.append(f"{where}: {err['msg']}")
        return error_response(422, "invalid_request", "; ".join(problems))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, e: StarletteHTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(e.status_code, "http_error")
        return error_response(e.status_code, code, str(e.detail))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, e: Exception):
        return error_response(500, "internal_error", f"{type(e).__name__}: {e}")

    def ready() -> Pipeline:
        if state.pipeline is None:
            if state.load_error:
                raise ApiError(503, "model_failed", f"the model could not be loaded: {state.load_error}")
            raise ApiError(503, "loading", "the model is still loading: retry in a moment", {"Retry-After": "1"})
        return state.pipeline

    def family(needed: str, endpoint: str) -> Pipeline:
        pipeline = ready()
        arch = state.family
        if arch != needed:
            other = {"encoder-decoder": "/v1/translate", "decoder": "/v1/generate"}.get(arch)
            if arch == "encoder" and pipeline.model.config.n_classes:
                other = "/v1/classify"
            hint = f"; use {other}" if other else "; it serves /v1/model only"
            raise ApiError(400, "wrong_endpoint", f"{endpoint} needs a {needed} model and this one is {arch}{hint}")
        return pipeline

    async def submit(job: Job, request: Request):
        """Queue the job and wait for it: 503 when the queue is full, 504 past the timeout; a
        client that goes away cancels it."""
        try:
            state.worker.submit(job)
        except QueueFull as e:
            raise ApiError(503, "overloaded", f"{e}: retry later", {"Retry-After": "1"}) from None
        future = asyncio.wrap_future(job.future)
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            done, _ = await asyncio.wait({future, gone}, timeout=max(0.0, job.arrived + config.timeout - time.monotonic()),
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if future not in done:
            job.stop.set()
            future.cancel()
            if gone in done:
                raise ApiError(499, "client_closed", "the client went away")
            raise ApiError(504, "timeout", f"the request took more than {config.timeout:g} s (see --timeout)")
        try:
            return future.result()
        except PipelineError as e:
            raise ApiError(422, "invalid_request", str(e)) from None

    @app.get("/health")
    async def health():
        if state.pipeline is None:
            status = "failed" if state.load_error else "loading"
            return JSONResponse({"status": status, "error": state.load_error}, status_code=503)
        return {"status": "ok"}

    @app.get("/v1/model")
    async def model_info():
        pipeline = ready()
        m = pipeline.model
        cfg = m.config
        return {
            "family": cfg.arch,
            "endpoints": {"encoder-decoder": ["/v1/translate", "/v1/attention"],
                          "decoder": ["/v1/generate", "/v1/attention"]}.get(cfg.arch, ["/v1/classify"] if cfg.n_classes else []),
            "parameters": sum(p.numel() for p in m.parameters()),
            "vocabulary": {"source": cfg.vocab_size, "target": cfg.target_vocab_size},
            "config": asdict(cfg),
            "decoding": asdict(pipeline.decode),
            "precision": pipeline.precision.precision,
            "chat": pipeline.chat is not None,
            "limits": {"max_lines": config.max_lines, "max_body_bytes": config.max_body_bytes,
                       "max_batch_tokens": config.max_batch_tokens, "timeout": config.timeout},
        }

    @app.get("/metrics", response_class=PlainTextResponse)
    async def metrics():
        worker = state.worker
        text = state.metrics.render(worker.depth if worker else 0, bool(worker and worker.busy))
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    @app.post("/v1/translate", response_model=TranslateResponse)
    async def translate(body: TranslateRequest, request: Request):
        pipeline = family("encoder-decoder", "/v1/translate")
        lines = [body.text] if isinstance(body.text, str) else body.text
        if len(lines) > config.max_lines:
            raise ApiError(413, "too_many_lines", f"the request has {len(lines)} lines, more than this server takes "
                           f"in one request ({config.max_lines}; see --max-lines): send them in several requests")
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
        outputs, cut = await submit(job, request)
        state.metrics.translated(len(lines))
        return {"translations": outputs, "truncated": cut}

    @app.post("/v1/generate", response_model=GenerateResponse,
              responses={200: {"content": {"text/event-stream": {}}, "description": "JSON, or SSE with stream"}})
    async def generate(body: GenerateRequest, request: Request):
        pipeline = family("decoder", "/v1/generate")
        if body.chat and pipeline.chat is None:
            raise ApiError(422, "invalid_request", "chat: this model has no chat template")
        decode = {k: v for k, v in body.model_dump(include={"max_new_tokens", "temperature", "top_k", "top_p"}).items()
                  if v is not None}
        try:
            s = pipeline.settings(**{k: v for k, v in decode.items() if k != "temperature" or v != 0})
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

        def run() -> str:
            return pipeline.generate(body.prompt, chat=body.chat, seed=body.seed, on_token=on_token,
                                     on_truncate=lambda message: None, **decode)

        job.run = run

        def final(text: str) -> dict:
            state.metrics.generated(len(ids))
            return {"text": text, "prompt_tokens": prompt_tokens, "completion_tokens": len(ids),
                    "truncated": prompt_tokens < len(full)}

        if not body.stream:
            return final(await submit(job, request))
        try:
            state.worker.submit(job)
        except QueueFull as e:
            raise ApiError(503, "overloaded", f"{e}: retry later", {"Retry-After": "1"}) from None
        return StreamingResponse(_stream(job, events, pipeline, final, config.timeout), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    @app.post("/v1/attention", response_model=AttentionResponse)
    async def attention(body: AttentionRequest, request: Request):
        pipeline = ready()
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

        m = await submit(Job("attention", run=run), request)
        return {"kind": m.kind, "layer": m.layer, "n_layers": m.n_layers, "n_heads": m.n_heads, "source": m.source,
                "output": m.output, "output_text": m.output_text, "rows": m.rows, "columns": m.columns,
                "weights": [[[round(float(w), 5) for w in row] for row in head] for head in m.weights.tolist()]}

    @app.post("/v1/classify", response_model=ClassifyResponse)
    async def classify(body: ClassifyRequest, request: Request):
        pipeline = ready()
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
        if len(inputs) > config.max_lines:
            raise ApiError(413, "too_many_lines", f"the request has {len(inputs)} inputs, more than this server takes "
                           f"in one request ({config.max_lines}; see --max-lines): send them in several requests")
        cut: list[int] = []
        if want == "images":
            batch = _decode_images(inputs, cfg.vision)

            def run():
                return pipeline.classify_images(batch, top_k=body.top_k)
        else:
            empty = [i for i, text in enumerate(inputs) if not text.strip()]
            if empty:
                raise ApiError(422, "invalid_request", f"text[{empty[0]}] is empty: send some text to classify")

            def run():
                return pipeline.classify(inputs, top_k=body.top_k, on_truncate=cut.extend)

        results = await submit(Job("classify", run=run), request)
        return {"labels": [[{"label": label, "probability": round(float(p), 6)} for label, p in r] for r in results],
                "truncated": [n - 1 for n in cut]}

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page():
        return HTMLResponse(resources.files(__package__).joinpath("static/index.html").read_text(encoding="utf-8"))

    return app


def _decode_images(items: list[str], vision) -> torch.Tensor:
    """Base64 image files -> uint8 (N, C, H, W); a bad one is a 422 naming its index."""
    from ..data.images import ImageError, read_image

    mode = "L" if vision.channels == 1 else "RGB"
    images = []
    for i, item in enumerate(items):
        try:
            raw = base64.b64decode(item, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(422, "invalid_request", f"images[{i}] is not base64: send each image file base64-encoded") from None
        try:
            images.append(torch.from_numpy(read_image(io.BytesIO(raw), mode, vision.image_size, name=f"images[{i}]")))
        except ImageError as e:
            raise ApiError(422, "invalid_request", str(e)) from None
    return torch.stack(images)


async def _disconnected(request: Request) -> None:
    """Returns when the client goes away: once the body is read, the server's next message is the
    disconnect (no polling)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def _stream(job: Job, events: asyncio.Queue, pipeline: Pipeline, final, timeout: float):
    """SSE: `data: {"text": piece}` per new piece of text, then `event: done` with the whole text and
    the token counts (or `event: error`). Pieces are the growth of the decoded text, held back while
    it ends inside a multi-byte character. A client that goes away stops the decoding."""
    future = asyncio.wrap_future(job.future)
    ids: list[int] = []
    sent = ""
    deadline = job.arrived + timeout
    try:
        while True:
            getter = asyncio.ensure_future(events.get())
            done, _ = await asyncio.wait({getter, future}, timeout=max(0.0, deadline - time.monotonic()),
                                         return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                ids.append(getter.result())
                text = pipeline.target_tokenizer.decode(ids)
                if text.startswith(sent) and not text.endswith("\ufffd") and len(text) > len(sent):
                    yield _event({"text": text[len(sent):]})
                    sent = text
                continue
            getter.cancel()
            if future in done:
                while not events.empty():  # tokens queued before the end
                    ids.append(events.get_nowait())
                try:
                    text = future.result()
                except Exception as e:  # noqa: BLE001
                    yield _event({"error": {"code": "generation_failed", "message": str(e)}}, "error")
                    return
                if text.startswith(sent) and len(text) > len(sent):
                    yield _event({"text": text[len(sent):]})
                yield _event(final(text), "done")
                return
            job.stop.set()
            future.cancel()
            yield _event({"error": {"code": "timeout", "message": f"the request took more than {timeout:g} s"}}, "error")
            return
    finally:
        job.stop.set()  # the client went away (or we are done): stop decoding at the next token


def _event(data: dict, name: str | None = None) -> str:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n"
