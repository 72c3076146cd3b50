"""OpenAI's API for decoder-only models, so that OpenAI's clients talk to `transformer serve`:
GET /v1/models, POST /v1/completions, POST /v1/chat/completions.

The rules:
- One model is served; its id is the model directory's name (create_app's model_name). A request
  naming another model is a 404 model_not_found.
- Settings not given take the model's decoding defaults (decode.json): max_tokens is
  max_new_tokens, temperature (0 = greedy) and top_p theirs; top_k is 0 (OpenAI has none); the
  model's repetition guards apply.
- The prompt is a completion's prompt (<s> first when the defaults say so) or the chat messages
  rendered with the model's chat template; one too long to leave room for max_tokens keeps its end
  (Pipeline.fit_prompt). usage.prompt_tokens counts the tokens fed, once per prompt (not per
  choice); completion_tokens the tokens generated, summed over the choices, </s> not counted.
- A stop string ends a choice at the token that completed it (counted, as vLLM counts it); the
  text ends just before the stop string, finish_reason "stop" ("length" when max_tokens ran out).
- n choices (of each prompt of a list) are n generation jobs; with a seed, choice i samples with
  seed + i: the choices differ and the request is reproducible.
- A stream sends each choice's text as it grows, holding back an end that could begin a stop
  string or that ends inside a multi-byte character: the streamed text equals the text of the same
  request not streamed.
- OpenAI's fields this server does not support are refused (400 naming the field) unless they
  hold the value that asks for nothing (DEFAULTS); those that change nothing here (IGNORED) are
  accepted; unknown ones are refused.
- Errors take OpenAI's shape, {"error": {"message", "type", "param", "code"}} (errors.py,
  OPENAI_PATHS), wrong types and ranges included (400, not 422).

The answer's side (each choice's text cut at its stop strings, the envelope of a whole reply or of
a stream's chunks) is openai_replies.py's; the requests and routes are here.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..config import DecodeConfig
from ..decoding.inputs import PipelineError
from ..decoding.pipeline import Pipeline
from .errors import ApiError
from .openai_replies import Choice, Reply, error_event, first_stop, settled
from .schemas import SERVER_CAPS, unicode_text
from .state import Generation, State

__all__ = ["Choice", "Reply", "error_event", "first_stop", "settled"]  # openai_replies' names

router = APIRouter()

IGNORED = frozenset(
    {"user", "metadata", "store", "service_tier", "parallel_tool_calls", "prompt_cache_key"}
)
"""OpenAI's fields that change nothing in this server's answer: accepted and ignored."""

DEFAULTS: dict[str, Any] = {
    "frequency_penalty": 0,
    "presence_penalty": 0,
    "logprobs": False,
    "top_logprobs": 0,
    "logit_bias": {},
    "echo": False,
    "best_of": 1,
    "suffix": "",
    "tools": [],
    "tool_choice": "none",
    "functions": [],
    "function_call": "none",
    "response_format": {"type": "text"},
    "modalities": ["text"],
}
"""OpenAI's fields this server does not support, with the value that asks for nothing (null
does too): accepted at that value, refused (400 naming the field) at any other."""

Stop = Annotated[str, Field(min_length=1)]


class StreamOptions(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    include_usage: bool | None = Field(None, description="a last chunk with the usage")


class Body(BaseModel):
    """The fields both endpoints take; strict types ("4" is not a number)."""

    model_config = ConfigDict(strict=True, extra="allow")

    model: str = Field(description="the served model's id (GET /v1/models)")
    max_tokens: int | None = Field(
        None,
        ge=1,
        le=SERVER_CAPS["max_new_tokens"],
        description="new tokens at most (default: the model's max_new_tokens)",
    )
    temperature: float | None = Field(
        None, ge=0, le=2, description="0 = greedy (default: the model's)"
    )
    top_p: float | None = Field(None, gt=0, le=1, description="nucleus (default: the model's)")
    n: int | None = Field(None, ge=1, le=128, description="choices per prompt (default 1)")
    seed: int | None = Field(
        None,
        ge=0,
        le=2**63 - 1,
        description="the same seed gives the same text; choice i samples with seed + i, so the "
        "choices differ and the request is reproducible",
    )
    stop: Stop | Annotated[list[Stop], Field(max_length=4)] | None = Field(
        None, description="up to 4 strings: the text ends before the first one generated"
    )
    stream: bool | None = Field(None, description="Server-Sent Events, OpenAI's chunks")
    stream_options: StreamOptions | None = None

    @model_validator(mode="before")
    @classmethod
    def _unicode(cls, data: Any) -> Any:
        return unicode_text(data)  # a lone surrogate is a 400, not the tokenizer's 500


class CompletionRequest(Body):
    prompt: str | Annotated[list[str], Field(min_length=1)] = Field(
        description="a text, or a list of texts (each with its n choices)"
    )


class Part(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")

    type: str
    text: str | None = None


class Message(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")

    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[Part] = Field(description="a text, or text parts (joined by newlines)")
    name: str | None = Field(None, description="ignored")


class ChatRequest(Body):
    messages: Annotated[list[Message], Field(min_length=1)]
    max_completion_tokens: int | None = Field(
        None, ge=1, le=SERVER_CAPS["max_new_tokens"], description="max_tokens' newer name"
    )


def _state(request: Request) -> State:
    return request.app.state.serve


@router.get("/v1/models")
async def models(request: Request):
    app = request.app.state
    return {
        "object": "list",
        "data": [
            {
                "id": app.model_name,
                "object": "model",
                "created": app.started,
                "owned_by": "transformer",
            }
        ],
    }


@router.post("/v1/completions")
async def completions(body: CompletionRequest, request: Request):
    state = _state(request)
    pipeline = _serving(state, request, body, "/v1/completions")
    prompts = [body.prompt] if isinstance(body.prompt, str) else body.prompt
    ids = [pipeline.prompt_ids(prompt) for prompt in prompts]
    if not all(ids):
        raise ApiError(
            400, "invalid_request", "the prompt is empty: send some text", param="prompt"
        )
    return await _complete(state, request, body, ids, body.max_tokens, chat=False)


@router.post("/v1/chat/completions")
async def chat_completions(body: ChatRequest, request: Request):
    state = _state(request)
    pipeline = _serving(state, request, body, "/v1/chat/completions")
    text = _render_chat(pipeline, body.messages)
    ids = [pipeline.target_tokenizer.encode(text)]
    max_tokens = body.max_completion_tokens or body.max_tokens
    return await _complete(state, request, body, ids, max_tokens, chat=True)


def _serving(state: State, request: Request, body: Body, endpoint: str) -> Pipeline:
    """The pipeline, once the model is a decoder, the request names it and asks for nothing this
    server does not do."""
    pipeline = state.serving(endpoint)
    name = request.app.state.model_name
    if body.model != name:
        raise ApiError(
            404,
            "model_not_found",
            f"the model {body.model!r} does not exist here: this server serves {name!r}",
            param="model",
        )
    for key, value in (body.model_extra or {}).items():
        if key in IGNORED or (key in DEFAULTS and value in (None, DEFAULTS[key])):
            continue
        if key in DEFAULTS:
            raise ApiError(
                400,
                "unsupported_parameter",
                f"{key}={json.dumps(value)} is not supported by this server: leave {key} out",
                param=key,
            )
        raise ApiError(
            400, "unknown_parameter", f"unrecognized field {key!r}: leave it out", param=key
        )
    return pipeline


def _render_chat(pipeline: Pipeline, messages: list[Message]) -> str:
    """The messages rendered with the model's chat template ("developer" is "system")."""
    if pipeline.chat is None:
        raise ApiError(
            400,
            "no_chat_template",
            "this model has no chat template (chat_template.json): send a prompt to "
            "/v1/completions instead",
            param="messages",
        )
    plain = []
    for i, m in enumerate(messages):
        for key, value in (m.model_extra or {}).items():
            if value is not None:
                raise ApiError(
                    400,
                    "unsupported_parameter",
                    f"messages[{i}].{key} is not supported by this server: send role and content",
                    param=f"messages[{i}].{key}",
                )
        if isinstance(m.content, str):
            content = m.content
        else:
            for j, part in enumerate(m.content):
                if part.type != "text" or part.text is None:
                    raise ApiError(
                        400,
                        "unsupported_content",
                        f"messages[{i}].content[{j}] is of type {part.type!r}: this server "
                        'reads text only ({"type": "text", "text": ...})',
                        param=f"messages[{i}].content",
                    )
            content = "\n".join(part.text for part in m.content)
        plain.append({"role": "system" if m.role == "developer" else m.role, "content": content})
    from jinja2 import TemplateError

    try:
        return pipeline.apply_chat_template(plain)
    except TemplateError as e:
        raise ApiError(
            400, "invalid_request", f"the chat template refused the messages: {e}", param="messages"
        ) from None


def _settings(pipeline: Pipeline, body: Body, max_tokens: int | None) -> DecodeConfig:
    given = {"max_new_tokens": max_tokens, "temperature": body.temperature, "top_p": body.top_p}
    try:
        return pipeline.settings(top_k=0, **{k: v for k, v in given.items() if v is not None})
    except (PipelineError, ValueError) as e:
        raise ApiError(400, "invalid_request", str(e)) from None


async def _complete(
    state: State,
    request: Request,
    body: Body,
    prompts: list[list[int]],
    max_tokens: int | None,
    chat: bool,
):
    pipeline = state.pipeline
    s = _settings(pipeline, body, max_tokens)
    n = body.n or 1
    if len(prompts) * n > state.config.max_lines:
        raise ApiError(
            413,
            "too_many_choices",
            f"the request asks for {len(prompts) * n} choices, more than this server makes in one "
            f"request ({state.config.max_lines}; see --max-lines): lower n",
            param="n",
        )
    fitted = [pipeline.fit_prompt(ids, s.max_new_tokens) for ids in prompts]
    stops = [body.stop] if isinstance(body.stop, str) else body.stop or []
    reply = Reply(request.app.state.model_name, chat)
    events: asyncio.Queue | None = asyncio.Queue() if body.stream else None
    loop = asyncio.get_running_loop()

    def post(item) -> None:  # from the worker thread to the stream
        try:
            loop.call_soon_threadsafe(events.put_nowait, item)
        except RuntimeError:  # the event loop is closed: the server is shutting down
            pass

    choices, jobs = [], []
    for i in range(len(prompts) * n):
        emit = None if events is None else (lambda text, i=i: post((i, text)))
        choices.append(Choice(pipeline.target_tokenizer, stops, emit))
        seed = None if body.seed is None else body.seed + i
        jobs.append(
            state.generation_job(fitted[i // n], s, seed=seed, on_token=choices[-1].on_token)
        )
    prompt_tokens = sum(len(ids) for ids in fitted)
    if events is None:
        try:
            done = await asyncio.gather(*(state.submit(job, request) for job in jobs))
        finally:
            for job in jobs:  # one failed (or the client went away): the others stop too
                job.stop.set()
        texts = [c.finish(g) for c, g in zip(choices, done, strict=True)]
        state.metrics.generated(sum(len(g.ids) for g in done))
        return reply.whole(texts, [g.finish_reason for g in done], prompt_tokens, done)
    try:
        for job in jobs:
            state.queue(job)
    except ApiError:
        for job in jobs:
            job.stop.set()
        raise
    for i, job in enumerate(jobs):
        job.future.add_done_callback(lambda future, i=i: post((i, None)))
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    return StreamingResponse(
        _stream(state, jobs, choices, events, reply, prompt_tokens, include_usage),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _stream(state, jobs, choices, events, reply, prompt_tokens, include_usage):
    """The chunks of a streamed request: (chat) each choice's role, then pieces of text as they
    come, each choice's finish, (include_usage) the usage, [DONE]. Events are (index, text), or
    (index, None) when that job is done."""
    timeout = state.config.timeout
    deadline = min(job.arrived for job in jobs) + timeout
    done: dict[int, Generation] = {}
    try:
        if reply.chat:
            for i in range(len(jobs)):
                yield reply.chunk(include_usage, [reply.piece(i, "", role=True)])
        while len(done) < len(jobs):
            try:
                i, text = await asyncio.wait_for(events.get(), deadline - time.monotonic())
            except asyncio.TimeoutError:
                yield error_event(504, "timeout", f"the request took more than {timeout:g} s")
                return
            if text is not None:
                yield reply.chunk(include_usage, [reply.piece(i, text)])
                continue
            try:
                done[i] = jobs[i].future.result()
            except Exception as e:  # noqa: BLE001 - told to the client, in OpenAI's shape
                yield error_event(500, "generation_failed", f"{type(e).__name__}: {e}")
                return
            rest = choices[i].finish(done[i])
            if rest:
                yield reply.chunk(include_usage, [reply.piece(i, rest)])
            yield reply.chunk(include_usage, [reply.piece(i, None, done[i].finish_reason)])
        generations = [done[i] for i in range(len(jobs))]
        state.metrics.generated(sum(len(g.ids) for g in generations))
        if include_usage:
            yield reply.chunk(include_usage, [], reply.usage(prompt_tokens, generations))
        yield "data: [DONE]\n\n"
    finally:
        for job in jobs:  # done, or the client went away: stop decoding at the next token
            job.stop.set()
