"""The server's errors: every failure is JSON `{"error": {"code", "message"}}` with its HTTP status,
one line that says what is wrong and what to do (as the command line's errors do). On OpenAI's
paths (OPENAI_PATHS) they take OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`,
and a malformed request is a 400 (OpenAI's clients raise BadRequestError), not a 422. On
LibreTranslate's paths (LIBRETRANSLATE_PATHS) they take LibreTranslate's, `{"error": "..."}`, with
its statuses: 400 for what the project answers 413 or 422, 403 for a key."""

from __future__ import annotations

import json

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException


class ApiError(Exception):
    """An error answered as JSON with this status and code."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        headers: dict | None = None,
        param: str | None = None,
    ):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers
        self.param = param
        """The request field at fault (OpenAI's shape shows it)."""


OPENAI_PATHS = frozenset({"/v1/models", "/v1/completions", "/v1/chat/completions"})
"""The paths of OpenAI's API (openai.py), whose errors take OpenAI's shape."""

LIBRETRANSLATE_PATHS = frozenset({"/translate", "/languages"})
"""The paths of LibreTranslate's API (libretranslate.py), whose errors take its shape."""

LIBRETRANSLATE_STATUS = {401: 403, 413: 400, 422: 400}
"""The statuses LibreTranslate's clients expect instead of the project's (a request it would refuse
as invalid is a 400)."""

OPENAI_TYPES = {401: "authentication_error", 403: "permission_error", 404: "not_found_error"}


def error_response(
    status: int,
    code: str,
    message: str,
    headers: dict | None = None,
    path: str = "",
    param: str | None = None,
) -> JSONResponse:
    """The error as JSON: the project's shape, OpenAI's on OPENAI_PATHS, LibreTranslate's on
    LIBRETRANSLATE_PATHS."""
    if path in LIBRETRANSLATE_PATHS:
        status = LIBRETRANSLATE_STATUS.get(status, status)
        return JSONResponse({"error": message}, status_code=status, headers=headers)
    if path in OPENAI_PATHS:
        kind = OPENAI_TYPES.get(
            status, "server_error" if status >= 500 else "invalid_request_error"
        )
        error = {"message": message, "type": kind, "param": param, "code": code}
        return JSONResponse({"error": error}, status_code=status, headers=headers)
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=headers
    )


def validation_message(e: RequestValidationError) -> str:
    """pydantic's errors as one line: `beam_size: Input should be a valid integer, not the string
    "4"; text: Field required`. A field that takes several types is named once (`text: Input
    should be a valid string or a valid list, not 3`), or by the items at fault in a list sent."""
    found: dict[str, list[dict]] = {}
    for err in e.errors():
        found.setdefault(field_path(err.get("loc", ())), []).append(err)
    problems = []
    for where, errs in found.items():
        inner = any(other.startswith((f"{where}[", f"{where}.")) for other in found)
        if inner and all(err["type"].endswith("_type") for err in errs):
            continue  # a union's other member: the errors inside what was sent say more
        problems.append(describe(where, errs))
    return "; ".join(dict.fromkeys(problems))


def field_path(loc: tuple) -> str:
    """("body", "text", "list[str]", 1) -> "text[1]": the fields and indices, without pydantic's
    tags of a union's members ("str", "list[str]")."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part != "body" and part not in UNION_TAGS and not part.endswith("]"):
            path += f".{part}" if path else part
    return path or "body"


UNION_TAGS = frozenset({"str", "int", "float", "bool", "list", "dict", "none"})


def describe(where: str, errs: list[dict]) -> str:
    """The errors of one field as one phrase."""
    first = errs[0]
    kind = first["type"]
    if kind == "json_invalid":
        return f"the body is not valid JSON ({first.get('ctx', {}).get('error', first['msg'])})"
    if where == "body" and kind in ("model_attributes_type", "model_type", "dict_type", "missing"):
        return "the body must be a JSON object (with the header 'Content-Type: application/json')"
    if kind == "extra_forbidden":  # named as sent, even "str"
        parent = field_path(first["loc"][:-1])
        return f"{'' if parent == 'body' else parent + '.'}{first['loc'][-1]}: unknown field"
    if where == "body":
        return first["msg"]  # a rule on the whole body (schemas.Strict's) names the field itself
    wants = [first["msg"]] + [err["msg"].removeprefix("Input should be ") for err in errs[1:]]
    sent = first.get("input")
    if kind.endswith("_type") or (kind == "literal_error" and len(repr(sent)) < 40):
        return f"{where}: {' or '.join(wants)}, not {json_kind(sent)}"
    return f"{where}: {' or '.join(wants)}"


def json_kind(value) -> str:
    """What a client sent, in JSON's words: `a string`, `3`, `null`."""
    if isinstance(value, str):
        return "a string" if len(value) > 30 else f"the string {json.dumps(value)}"
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    return "a list" if isinstance(value, list) else "an object"


def install_error_handlers(app: FastAPI) -> None:
    """Answer ApiError, invalid requests, unknown routes and anything unexpected as JSON errors."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, e: ApiError):
        return error_response(e.status, e.code, e.message, e.headers, request.url.path, e.param)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, e: RequestValidationError):
        path = request.url.path
        if path in OPENAI_PATHS:
            first = e.errors()[0] if e.errors() else {}
            loc = [p for p in first.get("loc", ()) if p != "body"]
            param = str(loc[0]) if loc else None  # the top field: OpenAI's param
            return error_response(400, "invalid_request", validation_message(e), None, path, param)
        return error_response(422, "invalid_request", validation_message(e), None, path)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, e: StarletteHTTPException):
        if e.status_code == 400 and e.__cause__ is not None:  # FastAPI could not read the body
            cause = e.__cause__
            e.detail = f"the body could not be read ({type(cause).__name__}: {cause}): send JSON"
        code = {
            400: "invalid_request",
            404: "not_found",
            405: "method_not_allowed",
            408: "timeout",
            413: "body_too_large",
        }.get(e.status_code, "http_error")
        return error_response(e.status_code, code, str(e.detail), None, request.url.path)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, e: Exception):
        return error_response(
            500, "internal_error", f"{type(e).__name__}: {e}", None, request.url.path
        )
