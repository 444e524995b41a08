"""The enqueue endpoint's hot path, answered without FastAPI's routing.

``POST /api/sessions/{name}/input`` (and its host form,
``/api/hosts/{host}/sessions/{name}/input``: :mod:`.addresses`) is what webhooks and scripts call in
bursts; everything else the server does is occasional. Measured on 2 cores
(``scripts/bench_http.py``, py-spy), FastAPI's own machinery around that one
route (exception and exit-stack middleware, the router's scan, dependency
solving, request and response objects) was about a fifth of the server's CPU
per message, as much as storing it. :class:`FastInput` sits inside
:class:`~.middleware.BodyLimit` (the body is read and size-checked already)
and answers the common case itself, with the very same parts the route uses:
the same token check, the same request model (:class:`~.models.InputRequest`,
validated as FastAPI validates a body: ``json.loads`` then the model), the
same :func:`~.enqueue.enqueue` (the writer, the answer), and errors from the service through the same
:func:`~.errors.agentwrap_error`.

Anything else is handed on unchanged to the application: another path or
method, a query string (``?wait=``), a content type other than JSON, a body
that is not a JSON object of the model's shape, a missing or wrong token. So
every refusal the route makes is still made by the route, and the OpenAPI
document still describes it.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from ...errors import AgentwrapError
from . import models as m
from .addresses import INPUT_PATH
from .auth import token_accepted
from .enqueue import enqueue
from .errors import agentwrap_error
from .middleware import replay

_JSON = b"application/json"


class FastInput:
    def __init__(self, app: ASGIApp, state: Any) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["query_string"]:
            await self.app(scope, receive, send)
            return
        match = INPUT_PATH.fullmatch(scope["path"])
        if match is None or not self._ours(scope):
            await self.app(scope, receive, send)
            return
        message = await receive()  # the whole body: BodyLimit read it
        body = message.get("body", b"")
        try:
            request = m.InputRequest.model_validate(json.loads(body))
        except (ValueError, RecursionError, ValidationError):  # the route says what is wrong
            await self.app(scope, replay(message, receive), send)
            return
        host, name = match.groups()
        address = name if host is None else f"{host}/{name}"  # as the route's Address
        try:
            status, answer = await enqueue(self.state.pool, address, request, None)
        except AgentwrapError as exc:
            params = {"name": name} if host is None else {"host": host, "name": name}
            scope = {**scope, "path_params": params}
            await agentwrap_error(Request(scope), exc, self.state.limits)(scope, receive, send)
            return
        data = answer.model_dump_json().encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-length", str(len(data)).encode()),
                                (b"content-type", _JSON)]})
        await send({"type": "http.response.body", "body": data})

    def _ours(self, scope: Scope) -> bool:
        """A JSON body (no content type, as FastAPI reads it, or exactly
        application/json) with the server's bearer token."""
        authorized = False
        for key, value in scope["headers"]:
            if key == b"authorization":
                scheme, _, given = value.decode("latin-1").partition(" ")
                authorized = scheme.lower() == "bearer" and token_accepted(
                    given.strip(), self.state.tokens.current())
            elif key == b"content-type" and value.split(b";")[0].strip().lower() != _JSON:
                return False
        return authorized

