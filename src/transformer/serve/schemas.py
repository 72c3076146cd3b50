"""The JSON bodies of the server's endpoints (pydantic), derived from the settings' definitions.

A decoding field of a request (beam_size, temperature, ...) takes its type, range, choices and
description from DecodeConfig's definition of that setting (transformer.config.decode), so the
server accepts the values the command line and a config file accept. On top, the server puts
resource limits of its own on what one request may cost: SERVER_CAPS.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator
from pydantic_core import PydanticCustomError

from ..config import (
    ATTENTION_KINDS,
    SAMPLING_SETTINGS,
    TRANSCRIBE_SETTINGS,
    TRANSLATE_SETTINGS,
    DecodeConfig,
    settings_of,
)
from ..config.checks import field_docs, field_kind

SERVER_CAPS: dict[str, float] = {
    "beam_size": 64,
    "n_best": 64,
    "max_len_a": 10,
    "max_len_b": 4096,
    "max_new_tokens": 4096,
}
"""Resource limits of one request (upper bounds on top of each setting's own range): a beam of
10,000 or a million new tokens would hold the worker for everyone else."""


def setting_field(cls: type, name: str, cap: float | None = None) -> tuple[Any, Any]:
    """(annotation, Field) of an optional request field for setting `name` of config class `cls`:
    its choices or type, bounds and doc from the definition; `cap`, an upper bound the server
    adds."""
    f = settings_of(cls)[name]
    bounds = f.metadata["bounds"]
    kind = field_kind(f)
    kind_type = {"int": int, "float": float, "str": str, "bool": bool}[kind]
    annotation = Literal[bounds.choices] if bounds.choices is not None else kind_type  # type: ignore[valid-type]
    limits = {
        key: getattr(bounds, key)
        for key in ("ge", "gt", "le", "lt")
        if getattr(bounds, key) is not None
    }
    if cap is not None:
        limits["le"] = min(limits.get("le", cap), cap)
    if kind == "float":
        limits["allow_inf_nan"] = not bounds.finite
    return annotation | None, Field(None, description=field_docs(cls).get(name), **limits)


def decode_fields(names: tuple[str, ...]) -> dict[str, tuple[Any, Any]]:
    """Request fields for these DecodeConfig settings, each None (= the model's default) unless
    given."""
    return {name: setting_field(DecodeConfig, name, SERVER_CAPS.get(name)) for name in names}


class Strict(BaseModel):
    """A request body: unknown fields are refused, and so are values of another JSON type than the
    field's (the string "4" for a number; a whole number is taken where a float is); every string
    in it must be Unicode text (no lone surrogate: see first_lone_surrogate)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _unicode(cls, data: Any) -> Any:
        return unicode_text(data)


def unicode_text(data: Any) -> Any:
    """A request body as it is, or a validation error naming the first string in it that holds a
    lone surrogate (a `mode="before"` model validator's body: Strict's, and OpenAI's bodies')."""
    found = first_lone_surrogate(data)
    if found is not None:
        where, char = found
        raise PydanticCustomError(
            "lone_surrogate",
            "{where} holds a lone surrogate (U+{code}), which is not a character: "
            "send valid Unicode text",
            {"where": where, "code": f"{ord(char):04X}"},
        )
    return data


LONE_SURROGATE = re.compile("[\ud800-\udfff]")
"""JSON's \\ud800 escapes decode to lone surrogates when unpaired: valid JSON, yet no character (not
UTF-8, and the tokenizers refuse them)."""


def first_lone_surrogate(data: Any) -> tuple[str, str] | None:
    """(where, the surrogate) of the first string in a JSON value (field names included) that holds
    a lone surrogate, `where` as `text[1]` or `messages[0].content`; None when there is none. (A
    loop, not a recursion: a deeply nested body is no RecursionError.)"""
    todo: list[tuple[str, Any]] = [("", data)]
    while todo:
        where, value = todo.pop()
        if isinstance(value, str):
            match = LONE_SURROGATE.search(value)
            if match:
                return where or "the body", match.group()
        elif isinstance(value, dict):
            for key, item in reversed(value.items()):
                todo += [(f"{where}.{key}" if where else str(key), item), ("a field name", key)]
        elif isinstance(value, list):
            todo += [(f"{where}[{i}]", item) for i, item in reversed(list(enumerate(value)))]
    return None


TranslateRequest = create_model(
    "TranslateRequest",
    __base__=Strict,
    text=(
        str | list[str],
        Field(
            description="One text, or a list of texts, each translated on its own. A text with "
            "line breaks (\\n, \\r\\n or \\r) is translated line by line and keeps its breaks; "
            "max_lines counts the lines."
        ),
    ),
    **decode_fields(TRANSLATE_SETTINGS),
)


class TranslateResponse(BaseModel):
    translations: list[str] | list[list[str]] = Field(
        description="One per input line, in order; with n_best > 1 a list of the n best per line."
    )
    truncated: list[int] = Field(
        description="Indices (from 0) of the lines cut to the model's max_positions."
    )


GenerateRequest = create_model(
    "GenerateRequest",
    __base__=Strict,
    prompt=(str, ...),
    chat=(
        bool,
        Field(False, description="apply the model's chat template to the prompt as a user message"),
    ),
    **decode_fields(SAMPLING_SETTINGS),
    seed=(int | None, Field(None, ge=0, le=2**63 - 1, description="for reproducible sampling")),
    stream=(
        bool,
        Field(
            False, description="Server-Sent Events: one per new piece of text, then a final 'done'"
        ),
    ),
)


class GenerateResponse(BaseModel):
    text: str
    prompt_tokens: int
    completion_tokens: int
    truncated: bool = Field(
        description="whether the prompt was cut (its end kept) to fit max_new_tokens"
    )


AttentionRequest = create_model(
    "AttentionRequest",
    __base__=Strict,
    text=(str, Field(min_length=1)),
    layer=(int, Field(-1, description="from 0; -1 = the last")),
    kind=(
        Literal[ATTENTION_KINDS] | None,  # type: ignore[valid-type]
        Field(None, description="cross (default for translation), self (decoder), encoder"),
    ),
    **decode_fields(("beam_size",)),
)


class AttentionResponse(BaseModel):
    kind: str
    layer: int
    n_layers: int
    n_heads: int
    source: list[str]
    output: list[str]
    output_text: str
    rows: list[str] = Field(description="the query of each row: the output token it predicted")
    columns: list[str] = Field(
        description="the keys: source tokens (cross, encoder) or decoder inputs (self)"
    )
    weights: list[list[list[float]]] = Field(description="(heads, rows, columns)")


TranscribeRequest = create_model(
    "TranscribeRequest",
    __base__=Strict,
    audio=(
        str | list[str],
        Field(
            description="A WAV file (PCM, any sample rate, mono or stereo) base64-encoded, or a "
            "list of them; each is transcribed on its own (long ones in 30 s windows)."
        ),
    ),
    **decode_fields(TRANSCRIBE_SETTINGS),
)


class TranscribeResponse(BaseModel):
    texts: list[str] = Field(description="One transcript per audio file, in order.")
    seconds: list[float] = Field(description="Each file's length in seconds.")


class ClassifyRequest(Strict):
    text: str | list[str] | None = Field(
        None, description="a text classifier's input: one text or a list of texts"
    )
    images: list[str] | None = Field(
        None,
        description="an image classifier's input: base64-encoded image files "
        "(PNG, JPEG, ...) of the model's size",
    )
    top_k: int = Field(
        1, ge=0, le=10000, description="labels per input, the most probable first (0 = all)"
    )


class LabelScore(BaseModel):
    label: str
    probability: float


class ClassifyResponse(BaseModel):
    labels: list[list[LabelScore]] = Field(description="per input, in order: its top_k labels")
    truncated: list[int] = Field(
        description="Indices (from 0) of the texts cut to the model's max_positions."
    )


class DetectRequest(Strict):
    images: list[str] = Field(
        description="Image files (PNG, JPEG, ...) base64-encoded, of any size (each is resized to "
        "the model's); each is searched on its own."
    )
    threshold: float | None = setting_field(DecodeConfig, "threshold")[1]


class DetectedBox(BaseModel):
    label: str
    score: float = Field(description="the probability of the object's class")
    box: list[float] = Field(
        description="[x0, y0, x1, y1] in pixels of the image sent (x right, y down; x1, y1 "
        "exclusive)"
    )


class DetectResponse(BaseModel):
    detections: list[list[DetectedBox]] = Field(
        description="Per image, in order: its objects, the most likely first."
    )
    sizes: list[list[int]] = Field(description="Each image's [width, height] in pixels.")
    model: str = Field(description="the model's id (the model directory's name)")
