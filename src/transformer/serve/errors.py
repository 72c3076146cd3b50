"""The server's errors: every failure is JSON `{"error": {"code", "message"}}` with its HTTP status,
one line that says what is wrong and what to do (as the command line's errors do)."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException


class ApiError(Exception):
    """An error answered as JSON with this status and code."""

    def __init__(self, status: int, code: str, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers


def error_response(
    status: int, code: str, message: str, headers: dict | None = None
) -> JSONResponse:
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
        return error_response(e.status, e.code, e.message, e.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, e: RequestValidationError):
        return error_response(422, "invalid_request", validation_message(e))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, e: StarletteHTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(e.status_code, "http_error")
        return error_response(e.status_code, code, str(e.detail))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, e: Exception):
        return error_response(500, "internal_error", f"{type(e).__name__}: {e}")
