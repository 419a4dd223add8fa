"""Errors in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}` with the right status."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "conflict_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    502: "upstream_error",
    503: "overloaded_error",
    504: "timeout_error",
}


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, code=self.code, param=self.param)


def error_body(status: int, message: str, *, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error"),
            "param": param,
            "code": code,
        }
    }


def error_response(
    status: int, message: str, *, code: str | None = None, param: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(error_body(status, message, code=code, param=param), status_code=status, headers=headers)


def install(app) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError):
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or None
        message = f"{where + ': ' if where else ''}{first.get('msg', 'invalid request')}"
        return error_response(400, message, code="invalid_request", param=where)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        message = exc.detail if isinstance(exc.detail, str) else "error"
        if exc.status_code == 404:
            message = f"no route {request.method} {request.url.path}"
        elif exc.status_code == 405:
            message = f"method {request.method} not allowed on {request.url.path}"
        return error_response(exc.status_code, message, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception):
        return error_response(500, f"internal error ({type(exc).__name__}); the server keeps running")
