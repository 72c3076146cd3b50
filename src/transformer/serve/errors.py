"""The server's errors: every failure is JSON `{"error": {"code", "message"}}` with its HTTP status,
one line that says what is wrong and what to do (as the command line's errors do). On OpenAI's
paths (OPENAI_PATHS) they take OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`,
and a malformed request is a 400 (OpenAI's clients raise BadRequestError), not a 422."""

from __future__ import annotations

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

OPENAI_TYPES = {401: "authentication_error", 403: "permission_error", 404: "not_found_error"}


def error_response(
    status: int,
    code: str,
    message: str,
    headers: dict | None = None,
    path: str = "",
    param: str | None = None,
) -> JSONResponse:
    """The error as JSON: the project's shape, or OpenAI's on OPENAI_PATHS."""
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
    """pydantic's errors as one line: `beam_size: Input should be greater than 0; text: Field
    required`."""
    problems = []
    for err in e.errors():
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        if err.get("type") == "json_invalid":
            problems.append(
                f"the body is not valid JSON ({err.get('ctx', {}).get('error', err['msg'])})"
            )
        elif where == "body" and err.get("type") in (
            "model_attributes_type",
            "dict_type",
            "missing",
        ):
            problems.append(
                "the body must be a JSON object (with the header 'Content-Type: application/json')"
            )
        elif err.get("type") == "extra_forbidden":
            problems.append(f"{where}: unknown field")
        else:
            problems.append(f"{where}: {err['msg']}")
    return "; ".join(problems)


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
        return error_response(422, "invalid_request", validation_message(e))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, e: StarletteHTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(e.status_code, "http_error")
        return error_response(e.status_code, code, str(e.detail), None, request.url.path)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, e: Exception):
        return error_response(
            500, "internal_error", f"{type(e).__name__}: {e}", None, request.url.path
        )
