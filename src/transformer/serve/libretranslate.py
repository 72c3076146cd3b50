"""LibreTranslate's API for translation models, so that LibreTranslate's clients (libretranslatepy,
browser extensions, the apps built on it) talk to `transformer serve`: POST /translate and
GET /languages.

The rules:
- One language pair is served: the one `--source-lang` and `--target-lang` name (ServeConfig),
  else the one the model directory records (languages.json, written by training from the
  recipe's data.source_lang and target_lang). Without either both endpoints answer 400 saying
  so. /languages lists the source language with the target as its one target, then the target
  language with none (LibreTranslate lists every language it has, with the targets of each).
- /translate takes JSON, or a form (application/x-www-form-urlencoded, as libretranslatepy sends
  it; multipart/form-data when python-multipart is installed): `q` (a text, or a list of texts),
  `source` (the code, or "auto"), `target`, `format` ("text", the default, or "html"),
  `alternatives` (a number, default 0) and `api_key`. Other fields are ignored, as LibreTranslate
  ignores them.
- A text is translated as /v1/translate translates it, with the model's decoding defaults
  (texts.translate_texts, in either batching mode): `translatedText` equals /v1/translate's
  `translations` for the same texts. A string `q` gets a string, a list a list.
- "auto" is the model's source language: the answer then has `detectedLanguage`, {"confidence":
  100.0, "language": SOURCE} (a list of them for a list `q`, as LibreTranslate answers). Nothing is
  detected: a model translates from one language, whatever the text.
- `format: "html"`: tags, entities, URLs and placeholders are kept exactly as sent and only the
  text is translated. A model trained with data.protect_markup reads each line with its markup as
  slot tokens (decode.keep_markup on, as the model's defaults usually have it: then it equals
  /v1/translate); another model translates the text between the markup piece by piece.
- `alternatives: n`: the other hypotheses of the model's own beam, at most beam_size - 1 of them
  (the beam is never widened, so `translatedText` stays the same), without repeats of the best or
  of each other and without empty ones; [] from a greedy model (beam 1) and for html translated
  piece by piece. Sent only when asked for (n > 0).
- With an API key (ServeConfig.api_key) a request must send it as `api_key` (or the header
  `Authorization: Bearer KEY`): else 403. /languages needs none, as LibreTranslate's.
- Errors take LibreTranslate's shape, {"error": "..."} (errors.py, LIBRETRANSLATE_PATHS), a missing
  or malformed field answered 400 as "Invalid request: ..." naming the field and the fix.
"""

from __future__ import annotations

import hmac
import json
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from ..config import ServeConfig
from ..data.markup import spans
from .errors import ApiError
from .schemas import SERVER_CAPS, first_lone_surrogate
from .state import State
from .texts import translate_texts

router = APIRouter()

FORMATS = ("text", "html")

LANGUAGE_NAMES = {
    "ar": "Arabic", "az": "Azerbaijani", "bg": "Bulgarian", "bn": "Bengali", "ca": "Catalan",
    "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek", "en": "English",
    "eo": "Esperanto", "es": "Spanish", "et": "Estonian", "eu": "Basque", "fa": "Persian",
    "fi": "Finnish", "fr": "French", "ga": "Irish", "gl": "Galician", "he": "Hebrew",
    "hi": "Hindi", "hu": "Hungarian", "id": "Indonesian", "it": "Italian", "ja": "Japanese",
    "ko": "Korean", "lt": "Lithuanian", "lv": "Latvian", "ms": "Malay", "nb": "Norwegian",
    "nl": "Dutch", "pl": "Polish", "pt": "Portuguese", "pt-BR": "Portuguese (Brazil)",
    "ro": "Romanian", "ru": "Russian", "sk": "Slovak", "sl": "Slovenian", "sq": "Albanian",
    "sv": "Swedish", "th": "Thai", "tl": "Tagalog", "tr": "Turkish", "uk": "Ukrainian",
    "ur": "Urdu", "vi": "Vietnamese", "zh": "Chinese", "zh-Hans": "Chinese",
    "zh-Hant": "Chinese (traditional)",
}  # fmt: skip
"""English names of the codes LibreTranslate serves; another code is named by itself."""


def _state(request: Request) -> State:
    return request.app.state.serve


def _pair(state: State) -> tuple[str, str]:
    """(source, target) codes (State.languages), or 400 when neither the server nor the model
    directory names them."""
    pair = state.languages()
    if pair is None:
        raise ApiError(
            400,
            "no_languages",
            "this server does not know which languages its model translates (its model directory "
            "has no languages.json): start it with --source-lang and --target-lang (e.g. "
            "--source-lang es --target-lang en)",
        )
    return pair


def _named(code: str) -> str:
    return f"{code} ({LANGUAGE_NAMES[code]})" if code in LANGUAGE_NAMES else code


@router.get("/languages")
async def languages(request: Request):
    """The languages, each with the codes it translates into: LibreTranslate's list."""
    state = _state(request)
    state.serving("/languages")
    source, target = _pair(state)
    return [
        {"code": source, "name": LANGUAGE_NAMES.get(source, source), "targets": [target]},
        {"code": target, "name": LANGUAGE_NAMES.get(target, target), "targets": []},
    ]


@router.post(
    "/translate",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                kind: {"schema": {"type": "object", "required": ["q", "source", "target"]}}
                for kind in ("application/json", "application/x-www-form-urlencoded")
            },
        }
    },
)
async def translate(request: Request):
    """LibreTranslate's translation: {"translatedText"} (see the module's rules)."""
    state = _state(request)
    fields = await _fields(request)
    _check_key(state.config, fields, request)
    pipeline = state.serving("/translate")
    q = fields.get("q")
    for name, fix in (
        ("q", "the text to translate, or a list of texts"),
        ("source", "the source language's code, or 'auto'"),
        ("target", "the target language's code"),
    ):
        if not fields.get(name):
            raise ApiError(
                400, "invalid_request", f"Invalid request: missing {name} parameter: send {fix}"
            )
    if not (isinstance(q, str) or (isinstance(q, list) and all(isinstance(t, str) for t in q))):
        raise ApiError(
            400, "invalid_request", "Invalid request: q must be a text or a list of texts"
        )
    text_format = fields.get("format") or "text"
    if text_format not in FORMATS:
        raise ApiError(
            400,
            "invalid_request",
            f"Invalid request: format {text_format!r} is not supported: send 'text' or 'html'",
        )
    wanted = _alternatives(fields.get("alternatives", 0))
    source, target = _pair(state)
    if fields["source"] not in ("auto", source) or fields["target"] != target:
        raise ApiError(
            400,
            "unsupported_pair",
            f"this server translates {_named(source)} to {_named(target)} only, not "
            f"{fields['source']} to {fields['target']}: send source {source!r} (or 'auto') and "
            f"target {target!r}",
        )
    texts = [q] if isinstance(q, str) else q
    n_best = max(1, min(wanted + 1, pipeline.decode.beam_size))
    settings = {"n_best": n_best} if n_best > 1 else {}
    by_piece = text_format == "html" and not getattr(
        pipeline.source_tokenizer, "protects_markup", False
    )
    if by_piece:
        translations = await _translate_between_markup(state, pipeline, request, texts)
    else:
        if text_format == "html":
            settings["keep_markup"] = True
        translations, _ = await translate_texts(state, pipeline, request, texts, settings)
    best = [t[0] if isinstance(t, list) else t for t in translations]
    answer: dict = {"translatedText": best[0] if isinstance(q, str) else best}
    if fields["source"] == "auto":
        detected = {"confidence": 100.0, "language": source}
        answer["detectedLanguage"] = detected if isinstance(q, str) else [detected] * len(q)
    if wanted > 0:
        others = [_others(t) if isinstance(t, list) else [] for t in translations]
        answer["alternatives"] = others[0] if isinstance(q, str) else others
    return JSONResponse(answer)


async def _fields(request: Request) -> dict:
    """The request's fields from its JSON body or its form; 400 for a body that is neither."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "multipart/form-data":
        try:
            form = await request.form()
        except AssertionError:  # starlette's: python-multipart is not installed
            raise ApiError(
                400,
                "invalid_request",
                "Invalid request: this server does not read multipart forms: send JSON or an "
                "application/x-www-form-urlencoded form",
            ) from None
        fields = {key: _one(form.getlist(key)) for key in form}
    else:
        body = await request.body()
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise ApiError(
                400, "invalid_request", "Invalid request: the body is not UTF-8 text"
            ) from None
        if kind == "application/json":
            try:
                fields = json.loads(text)
            except ValueError as e:
                raise ApiError(
                    400, "invalid_request", f"Invalid request: the body is not valid JSON ({e})"
                ) from None
            if not isinstance(fields, dict):
                raise ApiError(
                    400, "invalid_request", "Invalid request: the body must be a JSON object"
                )
        else:  # a form, as LibreTranslate reads a body that is not JSON
            found = parse_qs(text, keep_blank_values=True)
            fields = {key: _one(values) for key, values in found.items()}
    bad = first_lone_surrogate(fields)
    if bad is not None:
        raise ApiError(
            400,
            "invalid_request",
            f"Invalid request: {bad[0]} holds a lone surrogate (U+{ord(bad[1]):04X}), which is "
            "not a character: send valid Unicode text",
        )
    return fields


def _one(values: list):
    """A form field sent once is its value; sent several times (q=a&q=b), the list."""
    return values[0] if len(values) == 1 else values


def _check_key(config: ServeConfig, fields: dict, request: Request) -> None:
    """With an API key, `api_key` (or the Bearer header) must be it: else 403."""
    if not config.api_key:
        return
    given = fields.get("api_key")
    if not given:
        header = request.headers.get("authorization", "")
        given = header.removeprefix("Bearer ") if header.startswith("Bearer ") else None
    if not given:
        raise ApiError(
            403,
            "unauthorized",
            "this server needs an API key: send it as api_key (or the header "
            "'Authorization: Bearer KEY')",
        )
    if not isinstance(given, str) or not hmac.compare_digest(
        given.encode(), config.api_key.encode()
    ):
        raise ApiError(403, "unauthorized", "Invalid API key: send this server's key as api_key")


def _alternatives(value) -> int:
    """LibreTranslate's `alternatives`: a number (a form sends it as text), below 0 read as 0."""
    limit = SERVER_CAPS["n_best"] - 1
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 2.0 is 2, as LibreTranslate's int() reads it
    try:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError
        n = max(0, int(value))
    except ValueError:
        raise ApiError(
            400,
            "invalid_request",
            f"Invalid request: alternatives parameter is not a number: send 0 to {limit}",
        ) from None
    if n > limit:
        raise ApiError(
            400, "invalid_request", f"Invalid request: alternatives parameter must be <= {limit}"
        )
    return n


def _others(hypotheses: list[str]) -> list[str]:
    """A text's alternatives: its hypotheses after the best, none empty or repeated."""
    seen = {hypotheses[0], ""}
    return [h for h in hypotheses[1:] if not (h in seen or seen.add(h))]


async def _translate_between_markup(state, pipeline, request, texts: list[str]) -> list[str]:
    """HTML for a model without slot tokens: the markup spans (data.markup rule 1) stay, each run
    of text between them is translated alone (with the spaces around it kept), in one request."""
    runs: list[str] = []
    plans: list[list] = []  # per text: its pieces, markup as str, text runs as their index
    for text in texts:
        plan, at = [], 0
        for start, end in [*spans(text), (len(text), len(text))]:
            piece = text[at:start]
            core = piece.strip()
            if any(ch.isalpha() for ch in core):
                lead, trail = (
                    piece[: len(piece) - len(piece.lstrip())],
                    piece[len(piece.rstrip()) :],
                )
                plan += [lead, len(runs), trail]
                runs.append(core)
            else:
                plan.append(piece)
            plan.append(text[start:end])
            at = end
        plans.append(plan)
    done, _ = await translate_texts(state, pipeline, request, runs, {}) if runs else ([], [])
    return ["".join(p if isinstance(p, str) else done[p] for p in plan) for plan in plans]
