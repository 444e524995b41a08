"""agentwrap's one error tree, mapped once to HTTP status codes and JSON bodies.

Every expected failure is an :class:`~agentwrap.errors.AgentwrapError` raised
by the service (or by this package for HTTP's own cases: a missing token, a
cancel of a message that is no longer pending). :func:`install` registers the
handlers that turn them into ``{error, detail, hint, ...}``: ``error`` is a
short fixed phrase a client may match, ``detail`` the service's message
(naming the field or limit), ``hint`` what to do. The status comes from the
most specific class in :data:`STATUS`; nothing else builds an error body.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ...errors import (
    AgentwrapError,
    ConfigError,
    HostUnreachable,
    IdempotencyConflict,
    InvalidAnswer,
    InvalidMessage,
    MessageNotFound,
    MessageTooLarge,
    NoOpenQuestion,
    QueueError,
    QueueFull,
    RateLimited,
    SessionAmbiguous,
    SessionNameTaken,
    SessionNotEnded,
    SessionNotFound,
    SessionNotRunning,
    StaleAnswer,
    StoreLocked,
    StoreUnavailable,
    UntrustedSource,
)
from ...message import QueueLimits
from .addresses import address_of

log = logging.getLogger("agentwrap.http")


class Unauthorized(AgentwrapError):
    """No bearer token, or not the server's."""

    exit_code = 77
    default_hint = "send `Authorization: Bearer <token>`; `agentwrap token` prints it"


class MessageNotPending(QueueError):
    """A cancel of a message that is already being delivered or has ended."""

    default_hint = "GET /api/messages/{id} shows what happened to it"


#: Most specific class first wins (the lookup walks each error's MRO).
STATUS: dict[type[AgentwrapError], tuple[int, str]] = {
    Unauthorized: (401, "Unauthorized"),
    SessionNotFound: (404, "Session not found"),
    MessageNotFound: (404, "Message not found"),
    SessionNotRunning: (409, "Session not running"),
    SessionNotEnded: (409, "Session not ended"),
    SessionNameTaken: (409, "Session name taken"),
    SessionAmbiguous: (409, "Session name ambiguous"),
    MessageNotPending: (409, "Message not pending"),
    IdempotencyConflict: (409, "Idempotency key reused with other content"),
    NoOpenQuestion: (409, "No open question"),
    StaleAnswer: (409, "Stale answer"),
    InvalidAnswer: (400, "Invalid request"),
    MessageTooLarge: (413, "Payload too large"),
    InvalidMessage: (400, "Invalid request"),
    UntrustedSource: (403, "Source not trusted"),
    RateLimited: (429, "Rate limit exceeded"),
    QueueFull: (503, "Queue full"),
    StoreLocked: (503, "Store busy"),
    HostUnreachable: (503, "Host unreachable"),  # the hub has no link from that host now
    StoreUnavailable: (503, "Store unavailable"),  # StoreDown: for now (the CLI's 75)
    # the person's own config.toml is wrong: no bug of the server's, and nothing
    # it can serve (or change) until the file is fixed; the body says what and where
    ConfigError: (503, "Configuration error"),
    AgentwrapError: (500, "Internal error"),
}


def status_of(exc: AgentwrapError) -> tuple[int, str]:
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return STATUS[AgentwrapError]


def error_response(
    status: int, error: str, *, headers: Mapping[str, str] | None = None, **fields: Any
) -> JSONResponse:
    body = {"error": error, **{k: v for k, v in fields.items() if v is not None}}
    return JSONResponse(body, status_code=status, headers=headers)


def agentwrap_error(request: Request, exc: AgentwrapError, limits: QueueLimits) -> JSONResponse:
    """The response for one error of the tree (see :data:`STATUS`)."""
    status, error = status_of(exc)
    extra: dict[str, Any] = {}
    headers: dict[str, str] | None = None
    if isinstance(exc, SessionNotFound):
        extra["sessionId"] = address_of(request.path_params)
    elif isinstance(exc, SessionAmbiguous):
        extra["candidates"] = exc.candidates
    elif isinstance(exc, MessageNotFound):
        extra["messageId"] = request.path_params.get("message_id")
    elif isinstance(exc, RateLimited):
        retry = max(1, math.ceil(exc.retry_after))
        extra.update(limit=limits.rate_per_minute, window="60s", retryAfter=retry)
        headers = {"Retry-After": str(retry)}
    elif isinstance(exc, MessageTooLarge):
        extra["limit"] = limits.max_content_bytes
    elif isinstance(exc, Unauthorized):
        headers = {"WWW-Authenticate": "Bearer"}
    if status >= 500:
        log.error("%s %s: %s: %s", request.method, request.url.path, type(exc).__name__,
                  exc.message)
    return error_response(status, error, headers=headers, detail=exc.message,
                          hint=exc.hint or None, **extra)


def validation_error(exc: RequestValidationError) -> JSONResponse:
    """A body or parameter of the wrong shape: unknown field, wrong type, bad
    priority, a body that is not JSON or not UTF-8. The input is not echoed."""
    errors = exc.errors()
    first = errors[0] if errors else {}
    loc = [str(x) for x in first.get("loc", ()) if x not in ("body", "query", "path")]
    return error_response(
        400, "Invalid request", field=".".join(loc) or None,
        detail=str(first.get("msg", "invalid request")),
        errors=[{"field": ".".join(str(x) for x in e.get("loc", ())), "message": e.get("msg"),
                 "type": e.get("type")} for e in errors[:20]],
    )


def install(app: FastAPI, limits: QueueLimits) -> None:
    """Register the handlers on ``app``."""

    async def on_agentwrap(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, AgentwrapError)
        return agentwrap_error(request, exc, limits)

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return validation_error(exc)

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        phrase = {400: "Invalid request", 404: "Not found", 405: "Method not allowed"}
        return error_response(exc.status_code, phrase.get(exc.status_code, "HTTP error"),
                              detail=str(exc.detail), headers=exc.headers)

    app.add_exception_handler(AgentwrapError, on_agentwrap)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
