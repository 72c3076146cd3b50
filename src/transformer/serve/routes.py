"""The endpoints (see app.py for the list), on one router; each reads the server's State from the
app. ROUTES, the paths /metrics counts by name, is read from the router, so no route is left out."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from importlib import resources

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, StreamingResponse

from ..config import SAMPLING_SETTINGS
from ..decoding.inputs import PipelineError
from .detection import router as detection_router
from .errors import ApiError
from .libretranslate import router as libretranslate_router
from .openai import router as openai_router
from .schemas import (
    AttentionRequest,
    AttentionResponse,
    ClassifyRequest,
    ClassifyResponse,
    GenerateRequest,
    GenerateResponse,
    TranscribeRequest,
    TranscribeResponse,
    TranslateRequest,
    TranslateResponse,
)
from .state import State
from .streaming import stream
from .texts import translate_texts
from .uploads import base64_file, decode_images
from .worker import Job

router = APIRouter()


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
    return {
        "family": state.family,
        "task": pipeline.task.name,
        "endpoints": list(pipeline.task.paths),
        "parameters": sum(p.numel() for p in m.parameters()),
        "vocabulary": {"source": cfg.vocab_size, "target": cfg.target_vocab_size},
        "config": asdict(cfg),
        "decoding": asdict(pipeline.decode),
        "precision": pipeline.precision.precision,
        "chat": pipeline.chat is not None,
        "labels": pipeline.labels,
        "languages": None  # the pair LibreTranslate's API serves (State.languages)
        if (pair := state.languages()) is None
        else {"source": pair[0], "target": pair[1]},
        "limits": {
            "max_lines": config.max_lines,
            "max_body_bytes": config.max_body_bytes,
            "max_batch_tokens": config.max_batch_tokens,
            "timeout": config.timeout,
        },
    }


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(request: Request):
    state = _state(request)
    worker = state.worker
    text = state.metrics.render(
        worker.depth if worker else 0,
        bool(worker and worker.busy),
        getattr(worker, "running", 0),
    )
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4")


@router.post("/v1/translate", response_model=TranslateResponse)
async def translate(body: TranslateRequest, request: Request):
    state = _state(request)
    pipeline = state.serving("/v1/translate")
    texts = [body.text] if isinstance(body.text, str) else body.text
    settings = body.model_dump(exclude={"text"})
    translations, truncated = await translate_texts(state, pipeline, request, texts, settings)
    return {"translations": translations, "truncated": truncated}


@router.post(
    "/v1/generate",
    response_model=GenerateResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "JSON, or SSE with stream"}
    },
)
async def generate(body: GenerateRequest, request: Request):
    state = _state(request)
    pipeline = state.serving("/v1/generate")
    if body.chat and pipeline.chat is None:
        raise ApiError(422, "invalid_request", "chat: this model has no chat template")
    decode = {
        k: v for k, v in body.model_dump(include=set(SAMPLING_SETTINGS)).items() if v is not None
    }
    try:
        s = pipeline.settings(**decode)  # temperature 0 is greedy: decoding.sampling's rule
    except (PipelineError, ValueError) as e:
        raise ApiError(422, "invalid_request", str(e)) from None
    full = pipeline.prompt_ids(body.prompt, body.chat)
    fitted = pipeline.fit_prompt(full, s.max_new_tokens)
    prompt_tokens = len(fitted)
    ids: list[int] = []
    loop = asyncio.get_running_loop()
    events: asyncio.Queue | None = asyncio.Queue() if body.stream else None

    def on_token(token: int) -> None:
        ids.append(token)
        if events is not None:
            loop.call_soon_threadsafe(events.put_nowait, token)

    job = state.generation_job(fitted, s, seed=body.seed, on_token=on_token)
    decode_text = pipeline.target_tokenizer.decode
    finish, run = job.finish, job.run  # the answer here is the text (Pipeline.generate's)
    job.finish = lambda done: decode_text(finish(done).ids)
    job.run = lambda: decode_text(run().ids)

    def final(text: str) -> dict:
        state.metrics.generated(len(ids))
        return {
            "text": text,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(ids),
            "truncated": prompt_tokens < len(full),
        }

    if not body.stream:
        return final(await state.submit(job, request))
    state.queue(job)
    return StreamingResponse(
        stream(job, events, pipeline, final, state.config.timeout, state.client_gone),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@router.post("/v1/attention", response_model=AttentionResponse)
async def attention(body: AttentionRequest, request: Request):
    state = _state(request)
    pipeline = state.serving("/v1/attention")
    if state.family == "decoder" and body.kind not in (None, "self"):
        raise ApiError(
            400,
            "wrong_endpoint",
            f"kind={body.kind!r}: a language model has only decoder "
            "self-attention; use kind 'self'",
        )
    from ..viz.attention import attention_map

    def run():
        return attention_map(
            pipeline,
            body.text,
            layer=body.layer,
            kind=body.kind,
            head="all",
            beam_size=body.beam_size,
        )

    m = await state.submit(Job("attention", run=run), request)
    return {
        "kind": m.kind,
        "layer": m.layer,
        "n_layers": m.n_layers,
        "n_heads": m.n_heads,
        "source": m.source,
        "output": m.output,
        "output_text": m.output_text,
        "rows": m.rows,
        "columns": m.columns,
        "weights": [
            [[round(float(w), 5) for w in row] for row in head] for head in m.weights.tolist()
        ],
    }


@router.post("/v1/classify", response_model=ClassifyResponse)
async def classify(body: ClassifyRequest, request: Request):
    state = _state(request)
    pipeline = state.serving("/v1/classify")
    cfg = pipeline.model.config
    want, other = ("images", "text") if cfg.vision is not None else ("text", "images")
    given = body.images if want == "images" else body.text
    if given is None or getattr(body, other) is not None:
        raise ApiError(
            422,
            "invalid_request",
            f"this is {'an image' if want == 'images' else 'a text'} classifier: "
            f"send {want!r}" + (f", not {other!r}" if getattr(body, other) is not None else ""),
        )
    inputs = [given] if isinstance(given, str) else given
    max_lines = state.config.max_lines
    if len(inputs) > max_lines:
        raise ApiError(
            413,
            "too_many_lines",
            f"the request has {len(inputs)} inputs, more than this server takes "
            f"in one request ({max_lines}; see --max-lines): send them in several requests",
        )
    cut: list[int] = []
    if want == "images":
        batch = decode_images(inputs, cfg.vision)
        run = lambda: pipeline.classify_images(batch, top_k=body.top_k)  # noqa: E731
    else:
        empty = [i for i, text in enumerate(inputs) if not text.strip()]
        if empty:
            raise ApiError(
                422, "invalid_request", f"text[{empty[0]}] is empty: send some text to classify"
            )
        run = lambda: pipeline.classify(inputs, top_k=body.top_k, on_truncate=cut.extend)  # noqa: E731
    results = await state.submit(Job("classify", run=run), request)
    return {
        "labels": [
            [{"label": label, "probability": round(float(p), 6)} for label, p in r] for r in results
        ],
        "truncated": [n - 1 for n in cut],
    }


@router.post("/v1/transcribe", response_model=TranscribeResponse)
async def transcribe(body: TranscribeRequest, request: Request):
    from ..data.audio import SAMPLE_RATE, AudioError, read_wav_bytes

    state = _state(request)
    pipeline, config = state.serving("/v1/transcribe"), state.config
    items = [body.audio] if isinstance(body.audio, str) else body.audio
    if not items:
        raise ApiError(422, "invalid_request", "audio is an empty list: send a WAV file")
    if len(items) > config.max_lines:
        raise ApiError(
            413,
            "too_many_lines",
            f"the request has {len(items)} audio files, more than this server takes in one "
            f"request ({config.max_lines}; see --max-lines): send them in several requests",
        )
    clips = []
    for i, item in enumerate(items):
        name = f"audio[{i}]" if isinstance(body.audio, list) else "audio"
        raw = base64_file(item, name, "the WAV file")
        try:
            clips.append(read_wav_bytes(raw, name))
        except AudioError as e:
            raise ApiError(422, "invalid_request", str(e)) from None
    seconds = [len(c) / SAMPLE_RATE for c in clips]
    if sum(seconds) > config.max_audio_seconds:
        raise ApiError(
            413,
            "too_long",
            f"the request has {sum(seconds):.0f} s of audio, more than this server takes in one "
            f"request ({config.max_audio_seconds:.0f} s; see --max-audio-seconds): send less",
        )
    settings = {k: v for k, v in body.model_dump(exclude={"audio"}).items() if v is not None}
    try:
        pipeline.settings(**settings)
    except (PipelineError, ValueError) as e:
        raise ApiError(422, "invalid_request", str(e)) from None
    run = lambda: pipeline.transcribe(clips, **settings)  # noqa: E731
    texts = await state.submit(Job("transcribe", run=run), request)
    return {"texts": texts, "seconds": [round(s, 3) for s in seconds]}


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def page():
    return HTMLResponse(
        resources.files(__package__).joinpath("static/index.html").read_text(encoding="utf-8")
    )


ROUTES = frozenset(
    route.path
    for r in (router, detection_router, openai_router, libretranslate_router)
    for route in r.routes
)
"""The paths /metrics counts by name (every route above, /v1/detect, OpenAI's and LibreTranslate's,
so none is left out); others count as "other"."""
