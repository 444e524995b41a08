"""Three pieces of plain ASGI around the application.

:class:`TokenGate` answers an ``/api`` request without the server's bearer
token 401 from its headers alone, before a byte of its body is read: a
client without the token cannot make the server wait for, hold or parse a
body (the routes check the token again, as they always did).

:class:`BodyLimit` reads a request's body *before* anything parses it, at
most ``max_bytes`` of it: a bigger one (by its Content-Length, or by what
arrives) is answered 413 at once and never buffered beyond the limit, so a
client cannot make the server hold or parse megabytes; and within
``timeout_s`` of its head: a body trickled in (a byte a second) is answered
408 and the connection closed when that time is up (uvicorn has no body
timeout, and :class:`~.server.HeadDeadline` stops at the head). A body that
is not UTF-8 is answered 400 (JSON is UTF-8; a lenient decoder would store
mojibake, or a lossy replacement of what was sent). The body it read is
handed to the application unchanged; after that the application reads the
connection itself (an event stream learns of a disconnect that way).

:class:`AccessLog` logs method, path and status of each request, nothing else:
no query string, no headers (the token), no body (content, metadata).
uvicorn's own access log is off (it prints the query string).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from starlette.datastructures import State
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .auth import token_accepted
from .errors import Unauthorized

log = logging.getLogger("agentwrap.http.access")

#: Seconds a request's body has to arrive, from the end of its head (see the module).
BODY_TIMEOUT_S = 10.0
#: The ``/api`` paths open without a token (how a page gets one).
OPEN_PATHS = frozenset({"/api/login"})


async def _send_json(send: Send, status: int, body: dict[str, Any],
                     headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    data = json.dumps(body).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(data)).encode()),
                            (b"connection", b"close"), *headers]})
    await send({"type": "http.response.body", "body": data})


class TokenGate:
    """``/api`` requests without the token: 401 before the body (see the module)."""

    def __init__(self, app: ASGIApp, state: State) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith("/api/") or path in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        given: str | None = None
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, rest = value.decode("latin-1").partition(" ")
                given = rest.strip() if scheme.lower() == "bearer" else ""
        if given and token_accepted(given, self.state.tokens.current()):
            await self.app(scope, receive, send)
            return
        refused = Unauthorized("missing bearer token" if given is None else "wrong bearer token")
        await _send_json(send, 401, {"error": "Unauthorized", "detail": refused.message,
                                     "hint": refused.hint},
                         headers=((b"www-authenticate", b"Bearer"),))


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float = BODY_TIMEOUT_S) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = {"error": "Payload too large", "limit": self.max_bytes,
                     "detail": f"request bodies are limited to {self.max_bytes} bytes"}
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await _send_json(send, 400, {"error": "Invalid request",
                                                 "detail": "bad Content-Length"})
                    return
                if declared > self.max_bytes:
                    await _send_json(send, 413, too_large)
                    return
        chunks: list[bytes] = []
        size = 0
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                message = await asyncio.wait_for(receive(), deadline - time.monotonic())
            except asyncio.TimeoutError:
                await _send_json(send, 408, {
                    "error": "Request timeout",
                    "detail": f"the request body did not arrive within {self.timeout_s:g} s"
                              f" ({size} bytes came)",
                    "hint": "send the whole body at once, right after the headers"})
                return
            if message["type"] != "http.request":  # the client left before the body was in
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _send_json(send, 413, too_large)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        data = b"".join(chunks)
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            await _send_json(send, 400, {
                "error": "Invalid request",
                "detail": f"the request body is not valid UTF-8 (byte {exc.start})"})
            return
        await self.app(scope, replay({"type": "http.request", "body": data, "more_body": False},
                                     receive), send)


def replay(message: Message, receive: Receive) -> Receive:
    """``receive`` that gives ``message`` (a body read already) first."""
    replayed = False

    async def again() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return message
        return await receive()

    return again


class AccessLog:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        status = [0]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
                log.info("%s %s %d", scope["method"], scope["path"], status[0])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            if status[0] == 0:
                log.info("%s %s aborted after %.0f ms", scope["method"], scope["path"],
                         (time.monotonic() - started) * 1000)
